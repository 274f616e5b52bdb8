//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// x86_64 syscall numbers, spelled out so that the test runs on any arch
// (the builder does not care what the numbers are).
const (
	nrRead         = 0
	nrClone        = 56
	nrExecve       = 59
	nrPtrace       = 101
	nrMknod        = 133
	nrPersonality  = 135
	nrMount        = 165
	nrMknodat      = 259
	nrIOUringSetup = 425
	nrClone3       = 435
	nrPidfdGetfd   = 438
	x32Bit         = 0x40000000
)

// boxLike has every rule, and EPERM for other arches and x32.
func boxLike() Policy {
	return Policy{
		Arch: unix.AUDIT_ARCH_X86_64, ForeignArch: retEPERM, X32Bit: x32Bit, X32: retEPERM,
		EPERM: []uint32{nrMount, nrPidfdGetfd, nrIOUringSetup}, ENOSYS: []uint32{nrClone3},
		Clone: nrClone, Mknod: nrMknod, Mknodat: nrMknodat, Personality: nrPersonality,
	}
}

func build(t *testing.T, p Policy) []unix.SockFilter {
	t.Helper()
	prog, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func verdict(v uint32) string {
	switch v {
	case RetAllow:
		return "allow"
	case RetKill:
		return "kill"
	case retEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", v)
}

func call(nr uint32, args ...uint64) seccompData {
	d := seccompData{nr: nr, arch: unix.AUDIT_ARCH_X86_64, ip: 0x401000}
	copy(d.args[:], args)
	return d
}

func TestBuild(t *testing.T) {
	p := boxLike()
	prog := build(t, p)
	t.Logf("%d instructions", len(prog))
	for _, c := range []struct {
		name string
		d    seccompData
		want uint32
	}{
		{"read", call(nrRead, 0, 0, 10), RetAllow},
		{"execve", call(nrExecve), RetAllow},
		{"ptrace (not listed)", call(nrPtrace, unix.PTRACE_ATTACH, 1), RetAllow},
		{"pidfd_getfd", call(nrPidfdGetfd, 3, 0, 0), retEPERM},
		{"clone fork", call(nrClone, uint64(unix.SIGCHLD)), RetAllow},
		{"clone thread", call(nrClone, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|
			unix.CLONE_THREAD|unix.CLONE_SYSVSEM|unix.CLONE_SETTLS|unix.CLONE_PARENT_SETTID|unix.CLONE_CHILD_CLEARTID), RetAllow},
		{"clone vfork (Go's ForkExec)", call(nrClone, unix.CLONE_VFORK|unix.CLONE_VM|uint64(unix.SIGCHLD)), RetAllow},
		{"clone high bits only", call(nrClone, 1<<40|uint64(unix.SIGCHLD)), RetAllow},
		{"clone3", call(nrClone3, 0, 88), retENOSYS},
		{"mknod fifo", call(nrMknod, 0, unix.S_IFIFO|0o644, 0), RetAllow},
		{"mknod socket", call(nrMknod, 0, unix.S_IFSOCK|0o644, 0), RetAllow},
		{"mknod regular", call(nrMknod, 0, unix.S_IFREG|0o644, 0), RetAllow},
		{"mknod mode 0", call(nrMknod, 0, 0o644, 0), RetAllow},
		{"mknod char", call(nrMknod, 0, unix.S_IFCHR|0o600, 0xf401), retEPERM},
		{"mknod block", call(nrMknod, 0, unix.S_IFBLK|0o600, 0xfe00), retEPERM},
		{"mknod char, junk high bits", call(nrMknod, 0, 1<<33|unix.S_IFCHR, 0), retEPERM},
		{"mknodat fifo", call(nrMknodat, uint64(0xffffff9c), 0, unix.S_IFIFO|0o644, 0), RetAllow},
		{"mknodat char", call(nrMknodat, uint64(0xffffff9c), 0, unix.S_IFCHR|0o644, 0x501), retEPERM},
		{"mknodat block", call(nrMknodat, uint64(0xffffff9c), 0, unix.S_IFBLK|0o644, 0), retEPERM},
		{"mknodat mode in the wrong argument does not count", call(nrMknodat, unix.S_IFCHR, 0, unix.S_IFIFO, 0), RetAllow},
		{"personality query", call(nrPersonality, 0xffffffff), RetAllow},
		{"personality query (64-bit -1)", call(nrPersonality, ^uint64(0)), RetAllow},
		{"personality linux", call(nrPersonality, 0), RetAllow},
		{"personality linux32", call(nrPersonality, 8), RetAllow},
		{"personality uname26", call(nrPersonality, 0x20000), RetAllow},
		{"personality linux32|uname26", call(nrPersonality, 0x20008), RetAllow},
		{"personality addr_no_randomize", call(nrPersonality, 0x0040000), retEPERM},
		{"personality read_implies_exec", call(nrPersonality, 0x0400000), retEPERM},
		{"i386 read", seccompData{nr: 3, arch: unix.AUDIT_ARCH_I386}, retEPERM},
		{"i386 with an x86_64 allowed number", seccompData{nr: nrRead, arch: unix.AUDIT_ARCH_I386}, retEPERM},
		{"x32 read", call(x32Bit | nrRead), retEPERM},
		{"x32 execve", call(x32Bit | 520), retEPERM},
	} {
		if got := runBPF(t, prog, c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, verdict(got), verdict(c.want))
		}
	}
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		if got := runBPF(t, prog, call(nrClone, flag|uint64(unix.SIGCHLD))); got != retEPERM {
			t.Errorf("clone %#x: %s, want EPERM", flag, verdict(got))
		}
	}
	checkLists(t, p, prog)
}

// checkLists checks that the calls of p's lists get their action whatever
// their arguments, and that every other call without a rule is allowed.
func checkLists(t *testing.T, p Policy, prog []unix.SockFilter) {
	t.Helper()
	want := map[uint32]uint32{}
	for _, nr := range p.EPERM {
		want[nr] = retEPERM
	}
	for _, nr := range p.ENOSYS {
		want[nr] = retENOSYS
	}
	rules := []uint32{p.Clone, p.Mknod, p.Mknodat, p.Personality}
	for _, r := range p.ArgRules {
		rules = append(rules, r.Nr)
	}
	for nr := uint32(0); nr < 1024; nr++ {
		if nr != 0 && slices.Contains(rules, nr) {
			continue
		}
		w, ok := want[nr]
		if !ok {
			w = RetAllow
		}
		for _, args := range [][]uint64{nil, {0, 0, 0}, {^uint64(0), 1, 2, 3, 4, 5}} {
			if got := runBPF(t, prog, call(nr, args...)); got != w {
				t.Errorf("syscall %d(%v): %s, want %s", nr, args, verdict(got), verdict(w))
			}
		}
	}
}

// A policy like the VMM jail's: other arches killed, x32 ENOSYS, and only
// the clone rule; without the other rules mknod and personality are plain
// calls.
func TestBuildJailLike(t *testing.T) {
	p := Policy{
		Arch: unix.AUDIT_ARCH_X86_64, ForeignArch: RetKill, X32Bit: x32Bit, X32: retENOSYS,
		EPERM: []uint32{nrMount, nrPtrace, nrPidfdGetfd}, ENOSYS: []uint32{nrClone3, nrIOUringSetup},
		Clone: nrClone,
	}
	prog := build(t, p)
	for _, c := range []struct {
		name string
		d    seccompData
		want uint32
	}{
		{"i386", seccompData{nr: nrRead, arch: unix.AUDIT_ARCH_I386}, RetKill},
		{"aarch64", seccompData{nr: nrRead, arch: unix.AUDIT_ARCH_AARCH64}, RetKill},
		{"x32 getpid", call(x32Bit | 39), retENOSYS},
		{"clone CLONE_NEWUSER", call(nrClone, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), retEPERM},
		{"clone fork", call(nrClone, uint64(unix.SIGCHLD)), RetAllow},
		{"mknod char", call(nrMknod, 0, unix.S_IFCHR|0o600, 0), RetAllow},
		{"personality addr_no_randomize", call(nrPersonality, 0x0040000), RetAllow},
	} {
		if got := runBPF(t, prog, c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, verdict(got), verdict(c.want))
		}
	}
	checkLists(t, p, prog)

	// Without X32Bit, x32 numbers are just numbers nobody listed.
	p.X32Bit, p.X32 = 0, 0
	if got := runBPF(t, build(t, p), call(x32Bit|39)); got != RetAllow {
		t.Errorf("x32 getpid without X32Bit: %s, want allow", verdict(got))
	}
}

// A policy like the file daemon's: no set-id bits by chmod or create, no
// device nodes.
func TestBuildArgRules(t *testing.T) {
	const (
		nrOpen     = 2
		nrFchmod   = 91
		nrOpenat   = 257
		setID      = unix.S_ISUID | unix.S_ISGID
		creat      = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY
		atFDCWD    = uint64(0xffffff9c)
		highJunk   = uint64(1) << 40
		suid755    = unix.S_ISUID | 0o755
		sgid755    = unix.S_ISGID | 0o755
		sticky1777 = unix.S_ISVTX | 0o777
	)
	p := Policy{
		Arch: unix.AUDIT_ARCH_X86_64, ForeignArch: RetKill, X32Bit: x32Bit, X32: retENOSYS,
		EPERM: []uint32{nrMount}, ENOSYS: []uint32{nrClone3},
		Clone: nrClone, Mknod: nrMknod, Mknodat: nrMknodat,
		ArgRules: []ArgRule{
			{Nr: nrFchmod, Arg: 1, Mask: setID},
			{Nr: nrOpen, Arg: 2, Mask: setID, IfArg: 1, IfMask: creat},
			{Nr: nrOpenat, Arg: 3, Mask: setID, IfArg: 2, IfMask: creat},
			{Nr: nrMknod, Arg: 1, Mask: setID},
			{Nr: nrMknodat, Arg: 2, Mask: setID},
		},
	}
	prog := build(t, p)
	t.Logf("%d instructions", len(prog))
	for _, c := range []struct {
		name string
		d    seccompData
		want uint32
	}{
		{"fchmod 0755", call(nrFchmod, 3, 0o755), RetAllow},
		{"fchmod 1777", call(nrFchmod, 3, sticky1777), RetAllow},
		{"fchmod 4755", call(nrFchmod, 3, suid755), retEPERM},
		{"fchmod 2755", call(nrFchmod, 3, sgid755), retEPERM},
		{"fchmod 6755, junk high bits", call(nrFchmod, 3, highJunk|setID|0o755), retEPERM},
		{"fchmod mode in the wrong argument", call(nrFchmod, suid755, 0o644), RetAllow},
		{"open read, mode junk", call(nrOpen, 0, unix.O_RDONLY, suid755), RetAllow},
		{"open create 0644", call(nrOpen, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), RetAllow},
		{"open create 4755", call(nrOpen, 0, unix.O_CREAT|unix.O_WRONLY, suid755), retEPERM},
		{"open tmpfile 2755", call(nrOpen, 0, unix.O_TMPFILE|unix.O_RDWR, sgid755), retEPERM},
		{"openat create 0600", call(nrOpenat, atFDCWD, 0, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o600), RetAllow},
		{"openat create 6755", call(nrOpenat, atFDCWD, 0, unix.O_CREAT|unix.O_RDWR, setID|0o755), retEPERM},
		{"openat path only, mode junk", call(nrOpenat, atFDCWD, 0, unix.O_PATH|unix.O_NOFOLLOW, setID), RetAllow},
		{"mknodat fifo", call(nrMknodat, atFDCWD, 0, unix.S_IFIFO|0o644, 0), RetAllow},
		{"mknodat fifo 4755", call(nrMknodat, atFDCWD, 0, unix.S_IFIFO|suid755, 0), retEPERM},
		{"mknodat regular 2755", call(nrMknodat, atFDCWD, 0, unix.S_IFREG|sgid755, 0), retEPERM},
		{"mknodat char", call(nrMknodat, atFDCWD, 0, unix.S_IFCHR|0o600, 0x501), retEPERM},
		{"mknod block", call(nrMknod, 0, unix.S_IFBLK|0o600, 0), retEPERM},
		{"mknod socket 4755", call(nrMknod, 0, unix.S_IFSOCK|suid755, 0), retEPERM},
		{"mknod socket", call(nrMknod, 0, unix.S_IFSOCK|0o755, 0), RetAllow},
		{"clone newns", call(nrClone, unix.CLONE_NEWNS|uint64(unix.SIGCHLD)), retEPERM},
		{"clone fork", call(nrClone, uint64(unix.SIGCHLD)), RetAllow},
		{"mount", call(nrMount), retEPERM},
		{"read", call(nrRead, 0, 0, suid755), RetAllow},
	} {
		if got := runBPF(t, prog, c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, verdict(got), verdict(c.want))
		}
	}
	checkLists(t, p, prog)

	for name, edit := range map[string]func(*Policy){
		"rule and list":        func(p *Policy) { p.EPERM = append(p.EPERM, nrFchmod) },
		"rule and ENOSYS":      func(p *Policy) { p.ENOSYS = append(p.ENOSYS, nrOpenat) },
		"argument 6":           func(p *Policy) { p.ArgRules[0].Arg = 6 },
		"negative IfArg":       func(p *Policy) { p.ArgRules[1].IfArg = -1 },
		"empty mask":           func(p *Policy) { p.ArgRules[0].Mask = 0 },
		"number 0":             func(p *Policy) { p.ArgRules[0].Nr = 0 },
		"rule and personality": func(p *Policy) { p.Personality = nrFchmod },
	} {
		q := p
		q.ArgRules = slices.Clone(p.ArgRules)
		edit(&q)
		if _, err := Build(q); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	long := boxLike()
	for nr := uint32(1000); nr < 1300; nr++ {
		long.EPERM = append(long.EPERM, nr)
	}
	for name, edit := range map[string]func(*Policy){
		"no ForeignArch":           func(p *Policy) { p.ForeignArch = 0 },
		"X32Bit without X32":       func(p *Policy) { p.X32 = 0 },
		"EPERM and ENOSYS":         func(p *Policy) { p.ENOSYS = append(p.ENOSYS, nrMount) },
		"twice in EPERM":           func(p *Policy) { p.EPERM = append(p.EPERM, nrMount) },
		"a rule and a list":        func(p *Policy) { p.EPERM = append(p.EPERM, nrClone) },
		"two rules":                func(p *Policy) { p.Mknodat = nrMknod },
		"rules on big-endian s390": func(p *Policy) { p.Arch = unix.AUDIT_ARCH_S390X },
		"jumps out of range":       func(p *Policy) { *p = long },
	} {
		p := boxLike()
		edit(&p)
		if prog, err := Build(p); err == nil {
			t.Errorf("%s: built %d instructions", name, len(prog))
		}
	}
	// Lists alone work on any arch.
	if _, err := Build(Policy{Arch: unix.AUDIT_ARCH_S390X, ForeignArch: RetKill, EPERM: []uint32{nrMount}}); err != nil {
		t.Error(err)
	}
}

func TestRetErrno(t *testing.T) {
	if got, want := RetErrno(unix.EPERM), uint32(unix.SECCOMP_RET_ERRNO|1); got != want {
		t.Errorf("RetErrno(EPERM) = %#x, want %#x", got, want)
	}
	if err := Install(nil, 0); err == nil {
		t.Error("empty program installed")
	}
}

// TestInstallTSYNC checks that a TSYNC install that the kernel refuses
// (another thread has a filter of its own) is an error. Both filters allow
// everything, whichever threads end up with them.
func TestInstallTSYNC(t *testing.T) {
	allow := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: RetAllow}}
	// Each on a locked thread that ends with its goroutine, no_new_privs
	// and all.
	stop := make(chan struct{})
	defer close(stop)
	on := func(f func() error) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			if err == nil {
				err = f()
			}
			errc <- err
			if err == nil {
				<-stop // keep the thread and its filter until the test ends
			}
		}()
		return <-errc
	}
	if err := on(func() error { return Install(allow, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := on(func() error { return Install(allow, unix.SECCOMP_FILTER_FLAG_TSYNC) }); err == nil {
		t.Fatal("TSYNC install with another thread's filter in the way succeeded")
	} else {
		t.Log(err)
	}
}
