package jail

import (
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

const seccompArch = unix.AUDIT_ARCH_AARCH64

const x32Bit = 0

var denyENOSYS = []uint32{
	unix.SYS_CLONE3, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
}

var denyEPERM = []uint32{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_OPEN_TREE,
	unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD, unix.SYS_KCMP,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_USERFAULTFD, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_SYSLOG,
	unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
	unix.SYS_VHANGUP, unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
	unix.SYS_ADJTIMEX, unix.SYS_MEMFD_SECRET,
}

const sysMknod = 0 // arm64 has only mknodat

// setIDRules: as on amd64, without the calls arm64 does not have.
func setIDRules() []seccomp.ArgRule {
	return []seccomp.ArgRule{
		{Nr: unix.SYS_FCHMOD, Arg: 1, Mask: setIDBits},
		{Nr: unix.SYS_FCHMODAT, Arg: 2, Mask: setIDBits},
		{Nr: unix.SYS_FCHMODAT2, Arg: 2, Mask: setIDBits},
		{Nr: unix.SYS_OPENAT, Arg: 3, Mask: setIDBits, IfArg: 2, IfMask: creatFlags},
		{Nr: unix.SYS_MKDIRAT, Arg: 2, Mask: setIDBits},
		{Nr: unix.SYS_MKNODAT, Arg: 2, Mask: setIDBits},
	}
}

var setxattrCalls = []uint32{unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT}
