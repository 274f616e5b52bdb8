// Command containerd-shim-boxlite-v2 is containerd's runtime v2 shim for
// boxlite (runtime type io.containerd.boxlite.v2): containerd starts it, on
// its PATH, for each pod sandbox. See package k8sshim and docs/kubernetes.md.
package main

import (
	"os"

	"github.com/boxlite/boxlite/internal/k8sshim"
)

func main() { os.Exit(k8sshim.Main(os.Args[1:])) }
