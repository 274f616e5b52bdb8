package hv

import (
	"strconv"
	"strings"
)

// kernelCmdline is the guest kernel command line: console on the serial
// port, quiet boot, a panic reboots at once and reboot=t resets by triple
// fault without trying ACPI or the (absent) keyboard controller first; QEMU
// runs with -no-reboot, so either way it exits. cryptomgr.notests skips the
// crypto self-tests the kernel runs as each algorithm registers: under TCG
// they took 0.5-0.9 s of every boot (QEMU CPU time 3.1-3.8 s -> 2.3-2.8 s);
// the algorithms stay, only their known-answer tests at boot go. The KDF's
// own test ignores that flag, and is all its initcall does (another 45 ms). Under TCG tsc_early_khz is
// required: microvm has no timer to calibrate the TSC against and the guest
// hangs about half of the time without it. tsc=reliable too: TCG's TSC
// follows the host clock, but the kernel's watchdog judges it against
// jiffies, whose ticks come late under emulation, marks it unstable about a
// second into boot and falls back to the jiffies clocksource (4 ms
// resolution; TCP sending from the box then ran at 1 MB/s).
func kernelCmdline(cfg Config, tscKHz int) string {
	s := "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests initcall_blacklist=crypto_kdf108_init"
	if tscKHz > 0 {
		s += " tsc_early_khz=" + strconv.Itoa(tscKHz) + " tsc=reliable"
	}
	if c := strings.TrimSpace(cfg.Cmdline); c != "" {
		s += " " + c
	}
	return s
}

// buildArgs is QEMU's command line for a prepared cfg (argv without argv[0]),
// with the descriptors QEMU inherits: QMP, the agent port and the console
// and the NIC (-1: none), those of each disk (read-only, then read-write if writable)
// and those of each Config.FS.
func buildArgs(cfg Config, tscKHz, qmpFD, agentFD, consoleFD, netFD int, diskFDs [][]int, fsFDs ...int) []string {
	// rtc=on: without the CMOS RTC the guest spends about 1.2 s more
	// booting (and has no wall clock). acpi=on: the guest finds the
	// virtio-mmio devices and the IOAPIC through ACPI; the Debian kernel
	// has neither virtio_mmio.device= support nor MP tables. The PIT stays
	// (pit=off made guest boots hang, docs/NOTES.md): the agent stops it
	// once the kernel is up, as QEMU resets it into a mode that wakes its
	// main loop every 27 ms for nobody (guest/agent/pit_amd64.go).
	machine := "microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=on"
	ram := ramArgs(cfg)
	if ram != nil {
		machine += ",memory-backend=mem"
	}
	a := []string{
		"-M", machine,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// seccomp: QEMU may not exec, setuid, or use obsolete syscalls.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
	}
	switch cfg.Accel {
	case KVM:
		a = append(a, "-accel", "kvm", "-cpu", "host")
	default:
		// qemu64 plus the x86-64-v2 extensions, so userlands built for
		// x86-64-v2 run; "-cpu max" would boot about 0.3 s slower. +arat
		// (the APIC timer keeps running in deep C-states, as QEMU's does):
		// without it the guest's local APIC timer needs a broadcast timer
		// to stop its tick when idle, and with none it never stops, so an
		// idle guest took 250 timer interrupts a second (HZ); with it, 2-4
		// (an idle box's QEMU: 2.6% of a core before, 0.1% with the PIT
		// stopped too; docs/NOTES.md, "Idle boxes").
		a = append(a, "-accel", "tcg,tb-size="+strconv.Itoa(tbSizeMiB),
			"-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+arat")
	}
	a = append(a, ram...)
	if cfg.Incoming != nil {
		a = append(a, "-incoming", "defer")
	}
	a = append(a,
		"-m", strconv.Itoa(cfg.MemoryMiB),
		"-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", cfg.Kernel,
	)
	if cfg.Initrd != "" {
		a = append(a, "-initrd", cfg.Initrd)
	}
	a = append(a, "-append", kernelCmdline(cfg, tscKHz))
	if consoleFD >= 0 {
		a = append(a, "-chardev", "socket,id=con,fd="+strconv.Itoa(consoleFD))
	} else {
		a = append(a, "-chardev", "null,id=con")
	}
	a = append(a,
		"-serial", "chardev:con",
		// A guest that loads pvpanic and pvpanic-mmio reports a kernel
		// panic; QEMU then exits with status 1 instead of 0.
		"-device", "pvpanic",
		"-action", "panic=exit-failure",
	)
	if agentFD >= 0 {
		a = append(a,
			"-device", "virtio-serial-device",
			"-chardev", "socket,id=agent,fd="+strconv.Itoa(agentFD),
			"-device", "virtserialport,chardev=agent,name="+AgentPortName,
		)
	}
	if netFD >= 0 && cfg.NIC.Tap != nil {
		a = append(a,
			"-netdev", "tap,id=net0,fd="+strconv.Itoa(netFD),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.NIC.MAC,
		)
	} else if netFD >= 0 {
		a = append(a,
			"-netdev", "dgram,id=net0,local.type=fd,local.str="+strconv.Itoa(netFD),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.NIC.MAC,
		)
	}
	for i, fd := range cfg.extraNetFDs {
		id := "net" + strconv.Itoa(i+1)
		a = append(a,
			"-netdev", "tap,id="+id+",fd="+strconv.Itoa(fd),
			"-device", "virtio-net-device,netdev="+id+",mac="+cfg.ExtraNICs[i].MAC,
		)
	}
	for i, d := range cfg.Disks {
		// Each disk is an inherited descriptor in an fd set of its own.
		id, set := "d"+strconv.Itoa(i), strconv.Itoa(i+1)
		for _, fd := range diskFDs[i] {
			a = append(a, "-add-fd", "fd="+strconv.Itoa(fd)+",set="+set)
		}
		drive := "id=" + id + ",file=/dev/fdset/" + set + ",format=raw,if=none,cache=writeback"
		if d.ReadOnly {
			drive += ",readonly=on"
		} else {
			// A full host file system pauses the VM before the guest sees
			// an error (werror=enospc; the QMP event then ends the VM,
			// see event), so its ext4 stays consistent: reported to the
			// guest, the error aborts the journal and leaves writers stuck
			// on dirty pages that can never be written back. Other I/O
			// errors are the guest's to see. QEMU's image locking is off:
			// a VM that runs on after a completed save (Box.Fork) takes
			// its disk back on "cont", and QEMU's two descriptors of it
			// (one per mode, from the fd set) are two open file
			// descriptions whose OFD locks then conflict with each other
			// ("Failed to get shared "write" lock"). fds.go locks the disk
			// instead, one VM per writable disk.
			drive += ",readonly=off,discard=unmap,werror=enospc,rerror=report,file.locking=off"
		}
		dev := "virtio-blk-device,drive=" + id
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		a = append(a, "-drive", drive, "-device", dev)
	}
	a = append(a, fsArgs(cfg.FS, fsFDs)...)
	if cfg.RAM == nil {
		// The guest hands the pages it frees back to the host (free page
		// reporting): booting touches more RAM than an idle box keeps.
		// Last, so the other devices keep their guest names. Not with
		// RAM: QEMU 7.2 discards a file's pages by punching holes in the
		// file, which a sealed template refuses (and which would take
		// the pages from every VM mapping it), never from a private
		// mapping; a VM saved with the device is restored with it.
		a = append(a, "-device", "virtio-balloon-device,free-page-reporting=on")
	}
	return append(a,
		"-chardev", "socket,id=qmp,fd="+strconv.Itoa(qmpFD),
		"-mon", "chardev=qmp,mode=control",
	)
}

// optEscape escapes a value inside a QEMU option string: commas are doubled.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
