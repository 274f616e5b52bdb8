package jail

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/seccomp"
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

// installSeccomp loads vmmPolicy on the calling thread (no_new_privs must
// be set). The note is empty when there is no filter for this
// architecture.
func installSeccomp() (note string, err error) {
	if seccompArch == 0 {
		return "", nil
	}
	prog, err := seccomp.Build(vmmPolicy())
	if err != nil {
		return "", err
	}
	if err := seccomp.Install(prog, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("denylist of %d syscalls (EPERM), %d (ENOSYS), clone with namespace flags (EPERM), x32 calls ENOSYS, other architectures killed",
		len(denyEPERM), len(denyENOSYS)), nil
}
