// Package jail runs a helper program (the VMM, a network stack, virtiofsd)
// confined: own mount, network and IPC namespaces with a minimal root, an
// unprivileged uid, cgroup limits, rlimits, no_new_privs and a seccomp
// denylist, each layer reported when the host cannot give it.
package jail
