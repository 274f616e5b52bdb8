//go:build linux && amd64

package agent

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	binary.LittleEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runBPF is a classic BPF interpreter for the instructions a seccomp filter
// may use, written from the kernel's definitions (net/core/filter.c,
// seccomp_check_filter), independent of the assembler under test.
func runBPF(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	data := d.bytes()
	var a, x uint32
	var mem [16]uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		class := ins.Code & 0x07
		switch class {
		case unix.BPF_LD:
			switch {
			case ins.Code == unix.BPF_LD|unix.BPF_W|unix.BPF_ABS:
				if ins.K%4 != 0 || int(ins.K)+4 > len(data) {
					t.Fatalf("pc %d: bad load offset %d", pc, ins.K)
				}
				a = binary.LittleEndian.Uint32(data[ins.K:])
			case ins.Code == unix.BPF_LD|unix.BPF_IMM:
				a = ins.K
			case ins.Code == unix.BPF_LD|unix.BPF_MEM:
				a = mem[ins.K]
			default:
				t.Fatalf("pc %d: load %#x not allowed in seccomp", pc, ins.Code)
			}
		case unix.BPF_ALU:
			v := ins.K
			if ins.Code&0x08 == unix.BPF_X {
				v = x
			}
			switch ins.Code & 0xf0 {
			case unix.BPF_AND:
				a &= v
			case unix.BPF_OR:
				a |= v
			case unix.BPF_ADD:
				a += v
			case unix.BPF_SUB:
				a -= v
			case unix.BPF_RSH:
				a >>= v
			case unix.BPF_LSH:
				a <<= v
			default:
				t.Fatalf("pc %d: alu %#x", pc, ins.Code)
			}
		case unix.BPF_JMP:
			if ins.Code == unix.BPF_JMP|unix.BPF_JA {
				pc += int(ins.K)
				continue
			}
			v := ins.K
			if ins.Code&0x08 == unix.BPF_X {
				v = x
			}
			var cond bool
			switch ins.Code & 0xf0 {
			case unix.BPF_JEQ:
				cond = a == v
			case unix.BPF_JGT:
				cond = a > v
			case unix.BPF_JGE:
				cond = a >= v
			case unix.BPF_JSET:
				cond = a&v != 0
			default:
				t.Fatalf("pc %d: jump %#x", pc, ins.Code)
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_RET:
			if ins.Code&0x18 == unix.BPF_A {
				return a
			}
			return ins.K
		case unix.BPF_MISC:
			if ins.Code&0xf8 == unix.BPF_TAX {
				x = a
			} else {
				a = x
			}
		case unix.BPF_ST:
			mem[ins.K] = a
		default:
			t.Fatalf("pc %d: instruction %#x", pc, ins.Code)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

func boxProg(t *testing.T) []unix.SockFilter {
	t.Helper()
	prog, err := boxSeccomp()
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func verdict(v uint32) string {
	switch {
	case v == retAllow:
		return "allow"
	case v == retEPERM:
		return "EPERM"
	case v == retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", v)
}

func TestSeccompProgram(t *testing.T) {
	prog := boxProg(t)
	t.Logf("%d instructions", len(prog))
	call := func(nr uint32, args ...uint64) seccompData {
		d := seccompData{nr: nr, arch: unix.AUDIT_ARCH_X86_64, ip: 0x401000}
		copy(d.args[:], args)
		return d
	}
	for _, c := range []struct {
		name string
		d    seccompData
		want uint32
	}{
		{"read", call(unix.SYS_READ, 0, 0, 10), retAllow},
		{"execve", call(unix.SYS_EXECVE), retAllow},
		{"ptrace stays allowed", call(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 1), retAllow},
		{"chroot", call(unix.SYS_CHROOT), retAllow},
		{"setuid", call(unix.SYS_SETUID, 1000), retAllow},
		{"pidfd_open", call(unix.SYS_PIDFD_OPEN, 1, 0), retAllow},
		{"pidfd_getfd", call(unix.SYS_PIDFD_GETFD, 3, 0, 0), retEPERM},
		{"clone fork", call(unix.SYS_CLONE, uint64(unix.SIGCHLD)), retAllow},
		{"clone thread", call(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|
			unix.CLONE_THREAD|unix.CLONE_SYSVSEM|unix.CLONE_SETTLS|unix.CLONE_PARENT_SETTID|unix.CLONE_CHILD_CLEARTID), retAllow},
		{"clone vfork (Go's ForkExec)", call(unix.SYS_CLONE, unix.CLONE_VFORK|unix.CLONE_VM|uint64(unix.SIGCHLD)), retAllow},
		{"clone high bits only", call(unix.SYS_CLONE, 1<<40|uint64(unix.SIGCHLD)), retAllow},
		{"clone3", call(unix.SYS_CLONE3, 0, 88), retENOSYS},
		{"mknod fifo", call(unix.SYS_MKNOD, 0, unix.S_IFIFO|0o644, 0), retAllow},
		{"mknod socket", call(unix.SYS_MKNOD, 0, unix.S_IFSOCK|0o644, 0), retAllow},
		{"mknod regular", call(unix.SYS_MKNOD, 0, unix.S_IFREG|0o644, 0), retAllow},
		{"mknod mode 0", call(unix.SYS_MKNOD, 0, 0o644, 0), retAllow},
		{"mknod char", call(unix.SYS_MKNOD, 0, unix.S_IFCHR|0o600, 0xf401), retEPERM},
		{"mknod block", call(unix.SYS_MKNOD, 0, unix.S_IFBLK|0o600, 0xfe00), retEPERM},
		{"mknod char, junk high bits", call(unix.SYS_MKNOD, 0, 1<<33|unix.S_IFCHR, 0), retEPERM},
		{"mknodat fifo", call(unix.SYS_MKNODAT, uint64(0xffffff9c), 0, unix.S_IFIFO|0o644, 0), retAllow},
		{"mknodat char", call(unix.SYS_MKNODAT, uint64(0xffffff9c), 0, unix.S_IFCHR|0o644, 0x501), retEPERM},
		{"mknodat block", call(unix.SYS_MKNODAT, uint64(0xffffff9c), 0, unix.S_IFBLK|0o644, 0), retEPERM},
		{"mknodat mode in the wrong argument does not count", call(unix.SYS_MKNODAT, unix.S_IFCHR, 0, unix.S_IFIFO, 0), retAllow},
		{"personality query", call(unix.SYS_PERSONALITY, 0xffffffff), retAllow},
		{"personality query (64-bit -1)", call(unix.SYS_PERSONALITY, ^uint64(0)), retAllow},
		{"personality linux32", call(unix.SYS_PERSONALITY, 8), retAllow},
		{"personality uname26", call(unix.SYS_PERSONALITY, 0x20000), retAllow},
		{"personality addr_no_randomize", call(unix.SYS_PERSONALITY, 0x0040000), retEPERM},
		{"personality read_implies_exec", call(unix.SYS_PERSONALITY, 0x0400000), retEPERM},
		{"i386 read", seccompData{nr: 3, arch: unix.AUDIT_ARCH_I386}, retEPERM},
		{"i386 with an x86_64 allowed number", seccompData{nr: unix.SYS_READ, arch: unix.AUDIT_ARCH_I386}, retEPERM},
		{"x32 read", call(x32SyscallBit | unix.SYS_READ), retEPERM},
		{"x32 execve", call(x32SyscallBit | 520), retEPERM},
	} {
		if got := runBPF(t, prog, c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, verdict(got), verdict(c.want))
		}
	}
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		if got := runBPF(t, prog, call(unix.SYS_CLONE, flag|uint64(unix.SIGCHLD))); got != retEPERM {
			t.Errorf("clone %#x: %s, want EPERM", flag, verdict(got))
		}
	}

	// The brief's list, by number (x86_64), each refused whatever its arguments.
	mustDeny := map[string]uint32{
		"kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
		"pidfd_getfd": 438, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
		"userfaultfd": 323, "open_by_handle_at": 304, "mount": 165, "umount2": 166, "pivot_root": 155,
		"swapon": 167, "swapoff": 168, "reboot": 169, "unshare": 272, "setns": 308, "acct": 163, "quotactl": 179,
		"syslog": 103, "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
		"adjtimex": 159, "vhangup": 153, "lookup_dcookie": 212,
		"fsopen": 430, "fsmount": 432, "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "io_uring_setup": 425,
	}
	denied := map[uint32]bool{}
	for name, nr := range mustDeny {
		denied[nr] = true
		for _, args := range [][]uint64{nil, {0, 0, 0}, {^uint64(0), 1, 2, 3, 4, 5}} {
			if got := runBPF(t, prog, call(nr, args...)); got != retEPERM {
				t.Errorf("%s(%v): %s, want EPERM", name, args, verdict(got))
			}
		}
	}
	// Everything else the kernel has is allowed: a deny list, like docker's.
	p, _ := boxSeccompPolicy()
	for _, nr := range p.deny {
		denied[nr] = true
	}
	special := []uint32{p.clone, p.clone3, p.mknod, p.mknodat, p.personality}
	for nr := uint32(0); nr < 512; nr++ {
		if denied[nr] || slices.Contains(special, nr) {
			continue
		}
		if got := runBPF(t, prog, call(nr)); got != retAllow {
			t.Errorf("syscall %d: %s, want allow", nr, verdict(got))
		}
	}
}

func TestBPFAssembler(t *testing.T) {
	var a bpfAsm
	a.load(seccompNr)
	a.jump(unix.BPF_JEQ, 1, "no", "")
	a.ret(retAllow)
	a.label("no")
	a.ret(retEPERM)
	prog, err := a.assemble()
	if err != nil {
		t.Fatal(err)
	}
	if prog[1].Jt != 1 || prog[1].Jf != 0 {
		t.Fatalf("jump offsets %d/%d", prog[1].Jt, prog[1].Jf)
	}
	if runBPF(t, prog, seccompData{nr: 1}) != retEPERM || runBPF(t, prog, seccompData{nr: 2}) != retAllow {
		t.Fatal("assembled program does not run as written")
	}
	var b bpfAsm
	b.jump(unix.BPF_JEQ, 1, "missing", "")
	if _, err := b.assemble(); err == nil {
		t.Error("jump to a missing label assembled")
	}
	var c bpfAsm
	c.label("back")
	c.load(0)
	c.jump(unix.BPF_JEQ, 1, "back", "")
	if _, err := c.assemble(); err == nil {
		t.Error("backward jump assembled")
	}
	var d bpfAsm
	d.jump(unix.BPF_JEQ, 1, "far", "")
	for range 300 {
		d.ret(retAllow)
	}
	d.label("far")
	d.ret(retEPERM)
	if _, err := d.assemble(); err == nil {
		t.Error("jump beyond 255 instructions assembled")
	}
}

func TestBoxCaps(t *testing.T) {
	// docker's default set (moby oci/caps), 0xa80425fb, without CAP_MKNOD.
	const docker = 1<<unix.CAP_CHOWN | 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_FSETID | 1<<unix.CAP_FOWNER |
		1<<unix.CAP_MKNOD | 1<<unix.CAP_NET_RAW | 1<<unix.CAP_SETGID | 1<<unix.CAP_SETUID | 1<<unix.CAP_SETFCAP |
		1<<unix.CAP_SETPCAP | 1<<unix.CAP_NET_BIND_SERVICE | 1<<unix.CAP_SYS_CHROOT | 1<<unix.CAP_KILL |
		1<<unix.CAP_AUDIT_WRITE
	if docker != 0xa80425fb {
		t.Fatalf("docker's set is %#x", docker)
	}
	if got, want := boxCapsMask(), uint64(docker&^(1<<unix.CAP_MKNOD)); got != want {
		t.Fatalf("box caps %#x, want %#x", got, want)
	}
	names := map[string]bool{}
	for _, c := range boxCaps {
		if names[c.name] {
			t.Errorf("%s twice", c.name)
		}
		names[c.name] = true
		for _, never := range []int{unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SYS_MODULE, unix.CAP_MKNOD,
			unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_DAC_READ_SEARCH, unix.CAP_NET_ADMIN, unix.CAP_SYSLOG} {
			if c.cap == never {
				t.Errorf("box caps include %s", c.name)
			}
		}
	}
}

// TestSeccompInKernel installs the box's filter on one locked thread (with
// no_new_privs, so it needs no privileges) and checks what the kernel
// answers for calls that are harmless whatever the verdict.
func TestSeccompInKernel(t *testing.T) {
	prog := boxProg(t)
	dir := t.TempDir()
	type result struct {
		name string
		err  error
		want error
	}
	results := make(chan []result, 1)
	go func() {
		lockOffMainThread() // never unlocked: the thread ends with the goroutine
		var out []result
		check := func(name string, want error, trap uintptr, args ...uintptr) {
			var a [6]uintptr
			copy(a[:], args)
			r, _, errno := unix.RawSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
			var err error
			if errno != 0 {
				err = errno
			} else if trap == unix.SYS_PERSONALITY {
				unix.RawSyscall(unix.SYS_PERSONALITY, r, 0, 0) // restore
			}
			out = append(out, result{name, err, want})
		}
		defer func() { results <- out }()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			out = append(out, result{"no_new_privs", err, nil})
			return
		}
		if err := installSeccomp(prog, 0); err != nil {
			out = append(out, result{"install", err, nil})
			return
		}
		fifo, _ := unix.BytePtrFromString(filepath.Join(dir, "fifo"))
		chr, _ := unix.BytePtrFromString(filepath.Join(dir, "chr"))
		fdcwd := unix.AT_FDCWD
		atFdcwd := uintptr(fdcwd)
		check("getpid", nil, unix.SYS_GETPID)
		check("personality(PER_BSD)", unix.EPERM, unix.SYS_PERSONALITY, 6)
		check("personality(query)", nil, unix.SYS_PERSONALITY, 0xffffffff)
		// No arguments: unfiltered, clone3(NULL, 0) is EINVAL, never a fork.
		check("clone3", unix.ENOSYS, unix.SYS_CLONE3, 0, 0)
		check("unshare(CLONE_NEWUSER)", unix.EPERM, unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
		check("keyctl", unix.EPERM, unix.SYS_KEYCTL, 0, 0)
		check("pidfd_getfd", unix.EPERM, unix.SYS_PIDFD_GETFD, 0, 0, 0)
		check("mknodat fifo", nil, unix.SYS_MKNODAT, atFdcwd, uintptr(unsafe.Pointer(fifo)), unix.S_IFIFO|0o600, 0)
		check("mknodat char", unix.EPERM, unix.SYS_MKNODAT, atFdcwd, uintptr(unsafe.Pointer(chr)), unix.S_IFCHR|0o600, 0x103)
		check("mount", unix.EPERM, unix.SYS_MOUNT, 0, 0, 0, 0, 0)
		check("bpf", unix.EPERM, unix.SYS_BPF, 0, 0, 0)
		runtime.KeepAlive(fifo)
		runtime.KeepAlive(chr)
	}()
	for _, r := range <-results {
		if r.err != r.want {
			t.Errorf("%s: %v, want %v", r.name, r.err, r.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "chr")); err == nil {
		t.Error("the character device was made")
	}
}
