package jail

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Namespace flags that clone(2) may not carry: a new user namespace would
// hand the program every capability inside it.
const cloneNSFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// seccompFilter is the jail's own filter, stacked under whatever filter the
// program installs (the stricter action wins): a foreign architecture or
// ABI kills the process; the syscalls of denyENOSYS fail with ENOSYS (so
// libraries fall back: clone3 to clone, io_uring to epoll), those of
// denyEPERM and a clone with namespace flags fail with EPERM; everything
// else is allowed. It returns nil on architectures without a list.
func seccompFilter() []unix.SockFilter {
	if seccompArch == 0 {
		return nil
	}
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		offNr  = 0
		offArc = 4
		offA0  = 16 // low 32 bits of args[0] (little-endian)
	)
	// Jumps go to one of three returns at the end; targets are fixed up
	// once the length is known.
	const (
		toAllow = iota + 1
		toEPERM
		toENOSYS
	)
	type ins struct {
		f      unix.SockFilter
		jt, jf int // 0: next instruction, else a to* label
	}
	var p []ins
	emit := func(code uint16, k uint32, jt, jf int) { p = append(p, ins{unix.SockFilter{Code: code, K: k}, jt, jf}) }
	emit(ldAbs, offArc, 0, 0)
	emit(jeq, seccompArch, 0, 0) // jt: next; jf: kill (fixed below)
	kill := len(p) - 1
	emit(ldAbs, offNr, 0, 0)
	if x32Bit != 0 {
		emit(jge, x32Bit, toENOSYS, 0)
	}
	for _, nr := range denyENOSYS {
		emit(jeq, uint32(nr), toENOSYS, 0)
	}
	for _, nr := range denyEPERM {
		emit(jeq, uint32(nr), toEPERM, 0)
	}
	emit(jeq, uint32(unix.SYS_CLONE), 0, toAllow)
	emit(ldAbs, offA0, 0, 0)
	emit(jset, cloneNSFlags, toEPERM, toAllow)
	n := len(p)
	out := make([]unix.SockFilter, 0, n+4)
	target := map[int]int{toAllow: n, toEPERM: n + 1, toENOSYS: n + 2}
	for i, in := range p {
		f := in.f
		for _, j := range []struct {
			label int
			dst   *uint8
		}{{in.jt, &f.Jt}, {in.jf, &f.Jf}} {
			if j.label != 0 {
				*j.dst = uint8(target[j.label] - i - 1)
			}
		}
		if i == kill {
			f.Jf = uint8(n + 3 - i - 1)
		}
		out = append(out, f)
	}
	return append(out,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
	)
}

// installSeccomp loads seccompFilter on the calling thread (no_new_privs
// must be set). The note is empty when there is no filter for this
// architecture.
func installSeccomp() (note string, err error) {
	f := seccompFilter()
	if f == nil {
		return "", nil
	}
	if len(f) > 255 {
		return "", fmt.Errorf("filter too long for 8-bit jumps: %d instructions", len(f))
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return "", e
	}
	return fmt.Sprintf("denylist of %d syscalls (EPERM), %d (ENOSYS), clone with namespace flags (EPERM), other ABIs killed",
		len(denyEPERM), len(denyENOSYS)), nil
}
