//go:build linux

package agent

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The default capability bounding set of box processes is
// protocol.DefaultCaps: docker's default set without CAP_MKNOD (see there).
// Root in a box gets these caps; other users get them only through setuid
// or file capabilities, bounded by the same set. A box's options may add or
// drop some (protocol.SandboxPolicy).

// maxCap is above any capability a kernel has; PR_CAPBSET_DROP of a
// capability the kernel does not know fails with EINVAL, which ends the loop.
const maxCap = 63

// sysFunc is unix.RawSyscall6 (the calling thread) or
// syscall.AllThreadsSyscall6 (every thread of the process).
type sysFunc func(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, r2 uintptr, err syscall.Errno)

// limitCaps drops every capability not in keep from the bounding set and
// clears the inheritable and ambient sets (an inheritable capability outside
// the bounding set would survive an exec as root); the effective and
// permitted sets stay. Through unix.RawSyscall6 it changes only the calling
// thread, which must then stay locked to its goroutine for good.
func limitCaps(sys sysFunc, keep uint64) error {
	for c := 0; c <= maxCap; c++ {
		if keep&(1<<c) != 0 {
			continue
		}
		if _, _, errno := sys(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); errno != 0 {
			if errno == unix.EINVAL && c > unix.CAP_SYS_ADMIN {
				break // beyond the kernel's last capability
			}
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	if _, _, errno := sys(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 && errno != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", errno)
	}
	return setCaps(sys, false)
}

// setCaps clears the inheritable set and, with clearAll, the effective and
// permitted sets too (which leaves nothing for the bounding and ambient sets
// to matter for).
func setCaps(sys sysFunc, clearAll bool) error {
	// On the heap: the addresses are passed as integers.
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := new([2]unix.CapUserData)
	if err := unix.Capget(hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for i := range data {
		data[i].Inheritable = 0
		if clearAll {
			data[i].Effective, data[i].Permitted = 0, 0
		}
	}
	_, _, errno := sys(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0])), 0, 0, 0, 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if errno != 0 {
		return fmt.Errorf("capset: %w", errno)
	}
	return nil
}
