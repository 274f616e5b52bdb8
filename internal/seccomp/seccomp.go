//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// A Policy is a deny list for one architecture: every system call is
// allowed except those it names, by the architecture's syscall numbers. A
// rule whose number is 0 is off (no call a rule is for has number 0 on any
// architecture). A number may appear only once in the lists and the Clone,
// Mknod, Mknodat and Personality rules (ArgRules may add to the first three).
type Policy struct {
	Arch        uint32 // AUDIT_ARCH_* of the only architecture let through
	ForeignArch uint32 // action for a call of any other architecture (i386 on x86_64, arm on arm64)
	X32Bit      uint32 // x86_64: numbers with this bit are x32 calls; 0 for none
	X32         uint32 // action for an x32 call, when X32Bit is set

	EPERM  []uint32 // calls that fail with EPERM
	ENOSYS []uint32 // calls that fail with ENOSYS, so that libraries fall back (clone3 to clone, io_uring to epoll)

	// Calls refused only with some arguments (the low 32 bits, which is
	// all the kernel reads of them).
	Clone       uint32 // clone(2): with any CLONE_NEW* flag it fails with EPERM
	Mknod       uint32 // mknod(2): of a character or block device it fails with EPERM
	Mknodat     uint32 // mknodat(2): likewise
	Personality uint32 // personality(2): only with a value docker allows (PER_LINUX, PER_LINUX32, either with UNAME26, the query), else EPERM

	// ArgRules refuse calls by their arguments' bits. A number may have
	// several ArgRules, besides a Clone, Mknod or Mknodat rule (checked
	// first), but not also be Personality or in a list.
	ArgRules []ArgRule
}

// An ArgRule fails a call with EPERM when its argument Arg has any bit of
// Mask set; when IfMask is not 0, only if argument IfArg also has any bit
// of IfMask set (e.g. open's mode counts only with O_CREAT). Arguments are
// read by their low 32 bits, which is all the kernel reads of an int or a
// mode_t. Arg and IfArg are 0 to 5.
type ArgRule struct {
	Nr     uint32
	Arg    int
	Mask   uint32
	IfArg  int
	IfMask uint32
}

// Actions of a filter. ForeignArch and X32 take RetKill or a RetErrno; 0
// (SECCOMP_RET_KILL_THREAD, which leaves the rest of the process running)
// is refused as a forgotten field.
const (
	RetAllow uint32 = unix.SECCOMP_RET_ALLOW
	RetKill  uint32 = unix.SECCOMP_RET_KILL_PROCESS
)

// RetErrno is the action that fails the call with errno e.
func RetErrno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA }

// cloneNewFlags are the CLONE_NEW* flags clone(2) accepts (CLONE_NEWTIME
// only exists for clone3 and unshare).
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// personalityAllowed are the personality(2) values docker allows: PER_LINUX,
// PER_LINUX32, UNAME26 with either, and the 0xffffffff query.
var personalityAllowed = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// argLow is the offset of argument i's low word (the first, little endian).
func argLow(i int) uint32 { return uint32(offArg0 + 8*i) }

// auditArchLE is __AUDIT_ARCH_LE, set in the AUDIT_ARCH_* of little-endian
// architectures.
const auditArchLE = 0x40000000

// Build compiles p into a seccomp program for Install.
func Build(p Policy) ([]unix.SockFilter, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	var a bpfAsm
	var rets []uint32 // the actions jumped to, returned at the end
	to := func(action uint32) string {
		if !slices.Contains(rets, action) {
			rets = append(rets, action)
		}
		return fmt.Sprintf("ret %#x", action)
	}
	eperm := to(RetErrno(unix.EPERM))

	a.load(offArch)
	a.jump(unix.BPF_JEQ, p.Arch, "", to(p.ForeignArch))
	a.load(offNr)
	if p.X32Bit != 0 {
		a.jump(unix.BPF_JGE, p.X32Bit, to(p.X32), "")
	}
	for _, nr := range p.ENOSYS {
		a.jump(unix.BPF_JEQ, nr, to(RetErrno(unix.ENOSYS)), "")
	}
	// One label per syscall with argument checks; its checks run in turn
	// and the call is allowed when none refuses it.
	var argNrs []uint32
	for _, nr := range []uint32{p.Clone, p.Mknod, p.Mknodat} {
		if nr != 0 && !slices.Contains(argNrs, nr) {
			argNrs = append(argNrs, nr)
		}
	}
	for _, r := range p.ArgRules {
		if !slices.Contains(argNrs, r.Nr) {
			argNrs = append(argNrs, r.Nr)
		}
	}
	checks := func(nr uint32) string { return fmt.Sprintf("checks %d", nr) }
	for _, nr := range argNrs {
		a.jump(unix.BPF_JEQ, nr, checks(nr), "")
	}
	if p.Personality != 0 {
		a.jump(unix.BPF_JEQ, p.Personality, "personality", "")
	}
	for _, nr := range p.EPERM {
		a.jump(unix.BPF_JEQ, nr, eperm, "")
	}
	a.ret(RetAllow)

	for _, nr := range argNrs {
		a.label(checks(nr))
		if nr == p.Clone {
			a.load(argLow(0))
			a.jump(unix.BPF_JSET, cloneNewFlags, eperm, "")
		}
		for _, m := range []struct {
			nr  uint32
			arg int // the mode
		}{{p.Mknod, 1}, {p.Mknodat, 2}} {
			if m.nr == 0 || m.nr != nr {
				continue
			}
			a.load(argLow(m.arg))
			a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, unix.S_IFMT)
			a.jump(unix.BPF_JEQ, unix.S_IFCHR, eperm, "")
			a.jump(unix.BPF_JEQ, unix.S_IFBLK, eperm, "")
		}
		for i, r := range p.ArgRules {
			if r.Nr != nr {
				continue
			}
			next := fmt.Sprintf("rule %d end", i)
			if r.IfMask != 0 {
				a.load(argLow(r.IfArg))
				a.jump(unix.BPF_JSET, r.IfMask, "", next)
			}
			a.load(argLow(r.Arg))
			a.jump(unix.BPF_JSET, r.Mask, eperm, "")
			a.label(next)
		}
		a.ret(RetAllow)
	}
	if p.Personality != 0 {
		a.label("personality")
		a.load(argLow(0))
		for _, v := range personalityAllowed {
			a.jump(unix.BPF_JEQ, v, to(RetAllow), "")
		}
		a.ret(RetErrno(unix.EPERM))
	}

	for _, k := range rets {
		a.label(to(k))
		a.ret(k)
	}
	return a.assemble()
}

func (p Policy) check() error {
	if p.ForeignArch == 0 || p.X32Bit != 0 && p.X32 == 0 {
		return errors.New("seccomp: policy without an action for foreign calls")
	}
	var rules []uint32
	for _, nr := range []uint32{p.Clone, p.Mknod, p.Mknodat, p.Personality} {
		if nr != 0 {
			rules = append(rules, nr)
		}
	}
	for _, r := range p.ArgRules {
		switch {
		case r.Nr == 0:
			return errors.New("seccomp: argument rule without a syscall number")
		case r.Arg < 0 || r.Arg > 5 || r.IfArg < 0 || r.IfArg > 5:
			return fmt.Errorf("seccomp: argument rule for syscall %d: argument %d/%d out of 0..5", r.Nr, r.Arg, r.IfArg)
		case r.Mask == 0:
			return fmt.Errorf("seccomp: argument rule for syscall %d: empty mask", r.Nr)
		case p.Personality != 0 && r.Nr == p.Personality:
			return fmt.Errorf("seccomp: syscall %d has an argument rule and the personality rule", r.Nr)
		}
	}
	// A number may have several argument rules, and a clone or mknod rule
	// too, but may not also be in a list.
	for _, r := range p.ArgRules {
		if !slices.Contains(rules, r.Nr) {
			rules = append(rules, r.Nr)
		}
	}
	if len(rules) > 0 && p.Arch&auditArchLE == 0 {
		return fmt.Errorf("seccomp: argument rules need a little-endian arch, not %#x", p.Arch)
	}
	seen := map[uint32]bool{}
	for _, nr := range slices.Concat(p.EPERM, p.ENOSYS, rules) {
		if seen[nr] {
			return fmt.Errorf("seccomp: syscall %d named twice", nr)
		}
		seen[nr] = true
	}
	return nil
}
