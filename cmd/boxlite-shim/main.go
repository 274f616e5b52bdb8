// Command boxlite-shim supervises one box: it is started by the boxlite
// runtime, never by users. See package shim.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/jail"
	"github.com/boxlite/boxlite/internal/shim"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Usage: boxlite-shim CONFIG.json, with fd 3 the ready pipe and, unless the
// box is detached, fd 4 the parent-death pipe (its end stops the box; what
// the creator wrote on it first says why).
//
// boxlite-shim sweep BOX-ID removes the empty cgroups a killed shim of that
// box left (as containerd's `shim delete` cleans up after a shim): the
// runtime runs it when it removes a box, so the library itself never links
// the jail.
func main() {
	jail.Main() // a confined VMM's start runs through this binary (package jail)
	noHugePages()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("shim[%d] ", os.Getpid()))
	if len(os.Args) == 3 && os.Args[1] == shimapi.SweepCommand {
		if _, err := jail.Sweep(shimapi.CgroupPrefix(os.Args[2])); err != nil {
			log.Fatal(err)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: boxlite-shim CONFIG.json (started by the boxlite runtime)")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var cfg shimapi.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		log.Fatalf("config %s: %v", os.Args[1], err)
	}
	ready := os.NewFile(3, "ready")
	var parent io.Reader // absent when the box is detached
	if !cfg.Detach {
		parent = os.NewFile(4, "parent")
	}
	if err := shim.Run(cfg, ready, parent); err != nil {
		log.Printf("%v", err)
		os.Exit(1)
	}
}

// noHugePages turns transparent huge pages off for the shim and what it
// starts (the flag is inherited across fork and execve): QEMU asks for
// huge pages on TCG's translation cache and guest RAM (MADV_HUGEPAGE), so
// under the common THP "madvise" policy every touch of either filled 2 MiB.
// Without them an idle restored box's QEMU holds 3.5-4 MiB less (Rss 73.6
// -> 70.0 MiB, its first exec after the restore 0.1-0.2 s sooner, exec of
// `true` and a busybox loop the same within noise: docs/NOTES.md, "Memory
// per box"). A kernel without the prctl keeps its huge pages.
func noHugePages() {
	unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}
