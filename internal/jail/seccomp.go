package jail

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// vmmPolicy is the jail's own filter, stacked under whatever filter the
// program installs (the stricter action wins): a foreign architecture kills
// the process; x32 calls and the syscalls of denyENOSYS fail with ENOSYS
// (so libraries fall back: clone3 to clone, io_uring to epoll), those of
// denyEPERM and a clone with namespace flags (a new user namespace would
// hand the program every capability inside it) fail with EPERM; everything
// else is allowed. There is none where seccompArch is 0.
func vmmPolicy() seccomp.Policy {
	return seccomp.Policy{
		Arch:        seccompArch,
		ForeignArch: seccomp.RetKill,
		X32Bit:      x32Bit,
		X32:         seccomp.RetErrno(unix.ENOSYS),
		EPERM:       denyEPERM,
		ENOSYS:      denyENOSYS,
		Clone:       unix.SYS_CLONE,
	}
}

// fsPolicy is vmmPolicy plus Spec.DenySetID's rules: no set-id bit by
// chmod or create (setIDRules), no device node, no extended attribute
// (setxattrCalls, EPERM), and openat2 fails with ENOSYS, because its mode
// is behind a pointer the filter cannot read (virtiofsd then uses openat).
func fsPolicy() seccomp.Policy {
	p := vmmPolicy()
	p.Mknod, p.Mknodat = sysMknod, unix.SYS_MKNODAT
	p.ArgRules = setIDRules()
	p.EPERM = append(append([]uint32(nil), p.EPERM...), setxattrCalls...)
	p.ENOSYS = append(append([]uint32(nil), p.ENOSYS...), unix.SYS_OPENAT2)
	return p
}

// setIDBits are the mode bits a DenySetID program cannot set.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// creatFlags are the open flags with which the mode argument counts:
// O_CREAT and O_TMPFILE's own bit.
const creatFlags = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY

// installSeccomp loads vmmPolicy (fsPolicy with denySetID) on the calling
// thread (no_new_privs must be set). The note is empty when there is no
// filter for this architecture.
func installSeccomp(denySetID bool) (note string, err error) {
	if seccompArch == 0 {
		return "", nil
	}
	p := vmmPolicy()
	if denySetID {
		p = fsPolicy()
	}
	prog, err := seccomp.Build(p)
	if err != nil {
		return "", err
	}
	if err := seccomp.Install(prog, 0); err != nil {
		return "", err
	}
	note = fmt.Sprintf("denylist of %d syscalls (EPERM), %d (ENOSYS), clone with namespace flags (EPERM), x32 calls ENOSYS, other architectures killed",
		len(p.EPERM), len(p.ENOSYS))
	if denySetID {
		note += "; no set-id mode bits by chmod or create, no device nodes, no xattrs (EPERM)"
	}
	return note, nil
}
