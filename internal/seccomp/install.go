//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is the error of Install on a kernel without seccomp
// filters (it also unwraps to the errno, EINVAL or ENOSYS).
var ErrUnavailable = errors.New("seccomp: the kernel has no seccomp filters")

// Install installs prog (SECCOMP_SET_MODE_FILTER) on the calling thread, or
// on every thread of the process with unix.SECCOMP_FILTER_FLAG_TSYNC.
// Without no_new_privs the thread needs CAP_SYS_ADMIN.
func Install(prog []unix.SockFilter, flags uintptr) error {
	if len(prog) == 0 || len(prog) > unix.BPF_MAXINSNS {
		return fmt.Errorf("seccomp: program of %d instructions", len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch errno {
	case 0:
		// With TSYNC, a thread that cannot take the filter (it has one
		// of its own) is returned, and no thread has the filter.
		if r != 0 && flags&unix.SECCOMP_FILTER_FLAG_TSYNC != 0 {
			return fmt.Errorf("seccomp: thread %d has another filter; none installed", r)
		}
		return nil
	case unix.EINVAL, unix.ENOSYS:
		return fmt.Errorf("%w (%w)", ErrUnavailable, errno)
	}
	return fmt.Errorf("seccomp: %w", errno)
}
