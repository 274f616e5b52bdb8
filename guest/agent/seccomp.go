//go:build linux

package agent

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The box's seccomp filter is a deny list in the spirit of docker's default
// profile: everything is allowed except system calls that reach past the
// box's namespaces into the kernel or the agent (modules, kexec, mounts,
// namespaces, keyrings, bpf, fd stealing, clocks, swap, reboot, ...), which
// fail with EPERM. clone3 fails with ENOSYS, so that libc falls back to
// clone, whose flags the filter can see (no CLONE_NEW*). ptrace stays
// allowed, as in docker: what protects the sandbox init is that it is not
// dumpable and that box processes lack CAP_SYS_PTRACE.

// seccompPolicy is what the filter checks, by syscall number for one arch.
type seccompPolicy struct {
	arch   uint32 // AUDIT_ARCH_* of the only arch allowed through
	x32Bit uint32 // with arch x86_64: numbers with this bit are x32 calls (refused); 0 for none
	deny   []uint32
	// Calls allowed only with some arguments.
	clone3, clone, mknod, mknodat, personality uint32
}

// Linux's CLONE_NEW* flags that clone(2) accepts (CLONE_NEWTIME only exists
// for clone3 and unshare, which are refused outright).
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// personalityAllowed are the personality(2) values docker allows: PER_LINUX,
// PER_LINUX32, UNAME26 with either, and the 0xffffffff query.
var personalityAllowed = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Offsets in struct seccomp_data (little endian: an argument's low word
// comes first; the kernel reads clone flags, mknod modes and personality
// values as 32-bit or narrower, so the low word is all that counts).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
)

func seccompArgLow(i int) uint32 { return uint32(seccompArg0 + 8*i) }

var (
	retAllow  = uint32(unix.SECCOMP_RET_ALLOW)
	retEPERM  = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	retENOSYS = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
)

// bpfAsm assembles classic BPF with forward jumps to labels.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []bpfFixup
}

type bpfFixup struct {
	at     int
	jt, jf string // "" is the next instruction
}

func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// jump emits a conditional jump on K to label jt if true, jf if false.
func (a *bpfAsm) jump(op uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = make(map[string]int)
	}
	a.labels[name] = len(a.prog)
}

func (a *bpfAsm) load(off uint32) { a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (a *bpfAsm) ret(k uint32)    { a.stmt(unix.BPF_RET|unix.BPF_K, k) }

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	offset := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok {
			return 0, fmt.Errorf("bpf: no label %q", label)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("bpf: jump from %d to %q (%d) out of range", from, label, to)
		}
		return uint8(d), nil
	}
	for _, f := range a.fixups {
		jt, err := offset(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		jf, err := offset(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		a.prog[f.at].Jt, a.prog[f.at].Jf = jt, jf
	}
	if len(a.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("bpf: %d instructions, limit %d", len(a.prog), unix.BPF_MAXINSNS)
	}
	return a.prog, nil
}

// buildSeccomp compiles p into a seccomp BPF program.
func buildSeccomp(p seccompPolicy) ([]unix.SockFilter, error) {
	var a bpfAsm
	a.load(seccompArch)
	a.jump(unix.BPF_JEQ, p.arch, "", "eperm")
	a.load(seccompNr)
	if p.x32Bit != 0 {
		a.jump(unix.BPF_JGE, p.x32Bit, "eperm", "")
	}
	a.jump(unix.BPF_JEQ, p.clone3, "enosys", "")
	a.jump(unix.BPF_JEQ, p.clone, "clone", "")
	a.jump(unix.BPF_JEQ, p.mknod, "mknod", "")
	a.jump(unix.BPF_JEQ, p.mknodat, "mknodat", "")
	a.jump(unix.BPF_JEQ, p.personality, "personality", "")
	for _, nr := range p.deny {
		a.jump(unix.BPF_JEQ, nr, "eperm", "")
	}
	a.ret(retAllow)

	a.label("clone")
	a.load(seccompArgLow(0))
	a.jump(unix.BPF_JSET, cloneNewFlags, "eperm", "")
	a.ret(retAllow)

	for _, m := range []struct {
		label string
		arg   int
	}{{"mknod", 1}, {"mknodat", 2}} {
		a.label(m.label)
		a.load(seccompArgLow(m.arg))
		a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, unix.S_IFMT)
		a.jump(unix.BPF_JEQ, unix.S_IFCHR, "eperm", "")
		a.jump(unix.BPF_JEQ, unix.S_IFBLK, "eperm", "")
		a.ret(retAllow)
	}

	a.label("personality")
	a.load(seccompArgLow(0))
	for _, v := range personalityAllowed {
		a.jump(unix.BPF_JEQ, v, "allow", "")
	}
	a.ret(retEPERM)
	a.label("allow")
	a.ret(retAllow)

	a.label("eperm")
	a.ret(retEPERM)
	a.label("enosys")
	a.ret(retENOSYS)
	return a.assemble()
}

// boxSeccomp is the box's filter for this arch.
func boxSeccomp() ([]unix.SockFilter, error) {
	p, ok := boxSeccompPolicy()
	if !ok {
		return nil, fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
	}
	return buildSeccomp(p)
}

var errNoSeccomp = errors.New("seccomp: the kernel has no seccomp filters")

// installSeccomp installs prog on the calling thread, or on every thread of
// the process with unix.SECCOMP_FILTER_FLAG_TSYNC. Without no_new_privs the
// thread needs CAP_SYS_ADMIN.
func installSeccomp(prog []unix.SockFilter, flags uintptr) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch errno {
	case 0:
		return nil
	case unix.EINVAL, unix.ENOSYS:
		return fmt.Errorf("%w (%v)", errNoSeccomp, errno)
	}
	return fmt.Errorf("seccomp: %w", errno)
}
