//go:build linux && amd64

package agent

import (
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// x32 system calls arrive with arch x86_64 and this bit in the number.
const x32SyscallBit = 0x40000000

// boxSeccompPolicy is the x86_64 table; i386 (int 0x80) and x32 calls are
// refused whole, as no box image here is 32-bit.
func boxSeccompPolicy() (seccomp.Policy, bool) {
	eperm := seccomp.RetErrno(unix.EPERM)
	return seccomp.Policy{
		Arch:        unix.AUDIT_ARCH_X86_64,
		ForeignArch: eperm,
		X32Bit:      x32SyscallBit,
		X32:         eperm,
		EPERM: []uint32{
			// Kernel code and the machine.
			unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
			unix.SYS_DELETE_MODULE, unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_IOPL,
			unix.SYS_IOPERM, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG,
			unix.SYS_VHANGUP, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
			unix.SYS_USERFAULTFD, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
			// Keyrings are not namespaced.
			unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
			// Other processes' files and file handles.
			unix.SYS_PIDFD_GETFD, unix.SYS_OPEN_BY_HANDLE_AT,
			// Mounts and namespaces.
			unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
			unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOVE_MOUNT,
			unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
			// Clocks are not namespaced.
			unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
		},
		ENOSYS:      []uint32{unix.SYS_CLONE3},
		Clone:       unix.SYS_CLONE,
		Mknod:       unix.SYS_MKNOD,
		Mknodat:     unix.SYS_MKNODAT,
		Personality: unix.SYS_PERSONALITY,
	}, true
}
