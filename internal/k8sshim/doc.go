// Package k8sshim is containerd's runtime v2 shim for boxlite
// (containerd-shim-boxlite-v2, runtime type io.containerd.boxlite.v2): it
// serves containerd's task API over ttrpc and runs each pod sandbox (or
// standalone container) in a box, its containers each in a root of its own.
package k8sshim
