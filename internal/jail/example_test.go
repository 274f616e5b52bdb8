package jail_test

import (
	"log"
	"os"

	"github.com/boxlite/boxlite/internal/jail"
)

// ExampleCommand starts a VMM confined, the way a shim can. The shim's main
// calls jail.Main() first; the program reaches every file it must write
// through a descriptor, not a path: its QMP socket and agent channel as
// socketpair ends (-chardev socket,fd=N), its disks through fd sets (one
// read-write and one read-only descriptor per disk, as QEMU opens both),
// its console through a pipe the shim copies to the log. Only read-only
// inputs (kernel, initrd) are bound in.
func ExampleCommand() {
	var (
		boxID                      = "b1"
		kernel                     = "/var/lib/boxlite/kernel/vmlinuz"
		qmp, agent, diskRW, diskRO *os.File                 // socketpair ends and the disk, opened by the shim
		console                    *os.File                 // write end of a pipe the shim reads
		forkThread                 = func(f func()) { f() } // hv's onForkThread
	)
	uid, release, err := jail.AllocUID(jail.HostUIDDir, jail.UIDRangeLo, jail.UIDRangeHi)
	if err != nil {
		log.Fatal(err)
	}
	defer release()
	if missing := jail.Probe().String(); missing != "" {
		log.Print(missing) // or refuse to start, as policy says
	}
	c, err := jail.Command("", jail.Spec{
		Path: "/usr/bin/qemu-system-x86_64",
		Args: []string{"qemu-system-x86_64", "-M", "microvm", "-nodefaults", "-no-user-config", "-display", "none",
			"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
			"-kernel", kernel,
			"-chardev", "socket,id=qmp,fd=3", "-mon", "chardev=qmp,mode=control",
			"-device", "virtio-serial-device", "-chardev", "socket,id=agent,fd=4",
			"-device", "virtserialport,chardev=agent,name=boxlite.agent",
			"-add-fd", "fd=5,set=1", "-add-fd", "fd=6,set=1",
			"-drive", "id=d0,file=/dev/fdset/1,format=raw,if=none", "-device", "virtio-blk-device,drive=d0",
			"-serial", "stdio"},
		UID: uid, GID: uid,
		Binds:      []jail.Bind{{Host: kernel}}, // same path inside: works without a mount namespace too
		Devices:    []string{"/dev/kvm", "/dev/null", "/dev/urandom"},
		Cgroup:     &jail.CgroupSpec{Name: "boxlite-" + boxID, MemoryMaxBytes: 512 << 20, PidsMax: 256, CPUWeight: 100},
		ExtraFiles: []*os.File{qmp, agent, diskRW, diskRO},
		Stdout:     console, Stderr: console,
	})
	if err != nil {
		log.Fatal(err)
	}
	forkThread(func() { err = c.Start() }) // Pdeathsig follows the forking thread
	if err == nil {
		err = c.Ready() // a *jail.StageError names the failing step
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("qemu pid %d; missing layers:\n%s", c.Process().Pid, c.Layers())
	// ... QMP handshake on qmp, agent hello on agent ...
	err = c.Wait() // also removes the cgroup
}
