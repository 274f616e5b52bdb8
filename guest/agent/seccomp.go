//go:build linux

package agent

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// The box's seccomp filter is a deny list in the spirit of docker's default
// profile: everything is allowed except system calls that reach past the
// box's namespaces into the kernel or the agent (modules, kexec, mounts,
// namespaces, keyrings, bpf, fd stealing, clocks, swap, reboot, ...), which
// fail with EPERM, as do clone with CLONE_NEW* flags, mknod of devices and
// personality values docker does not allow. clone3 fails with ENOSYS, so
// that libc falls back to clone, whose flags the filter can see. Other
// arches and ABIs fail with EPERM. ptrace stays allowed, as in docker: what
// protects the sandbox init is that it is not dumpable and that box
// processes lack CAP_SYS_PTRACE.

// boxSeccomp is the box's filter for this arch.
func boxSeccomp() ([]unix.SockFilter, error) {
	p, ok := boxSeccompPolicy()
	if !ok {
		return nil, fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
	}
	return seccomp.Build(p)
}
