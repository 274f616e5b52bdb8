//go:build linux && amd64

package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/seccomp"
)

func boxProg(t *testing.T) []unix.SockFilter {
	t.Helper()
	prog, err := boxSeccomp()
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestBoxPolicy checks the box's table; what a filter does with a table is
// package seccomp's tests, and TestSeccompInKernel checks the kernel's
// answers.
func TestBoxPolicy(t *testing.T) {
	t.Logf("%d instructions", len(boxProg(t)))
	p, _ := boxSeccompPolicy()
	eperm := seccomp.RetErrno(unix.EPERM)
	if p.Arch != unix.AUDIT_ARCH_X86_64 || p.ForeignArch != eperm || p.X32Bit != x32SyscallBit || p.X32 != eperm {
		t.Errorf("arch %#x, other arches %#x, x32 bit %#x and action %#x; want x86_64 and EPERM for i386 and x32",
			p.Arch, p.ForeignArch, p.X32Bit, p.X32)
	}
	if p.Clone != unix.SYS_CLONE || p.Mknod != unix.SYS_MKNOD || p.Mknodat != unix.SYS_MKNODAT || p.Personality != unix.SYS_PERSONALITY {
		t.Errorf("argument rules: clone %d, mknod %d, mknodat %d, personality %d", p.Clone, p.Mknod, p.Mknodat, p.Personality)
	}
	if !slices.Equal(p.ENOSYS, []uint32{unix.SYS_CLONE3}) {
		t.Errorf("ENOSYS %v, want clone3 only", p.ENOSYS)
	}
	// The brief's list, by number (x86_64), each refused with EPERM.
	mustDeny := map[string]uint32{
		"kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
		"pidfd_getfd": 438, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
		"userfaultfd": 323, "open_by_handle_at": 304, "mount": 165, "umount2": 166, "pivot_root": 155,
		"swapon": 167, "swapoff": 168, "reboot": 169, "unshare": 272, "setns": 308, "acct": 163, "quotactl": 179,
		"syslog": 103, "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
		"adjtimex": 159, "vhangup": 153, "lookup_dcookie": 212,
		"fsopen": 430, "fsmount": 432, "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "io_uring_setup": 425,
	}
	for name, nr := range mustDeny {
		if !slices.Contains(p.EPERM, nr) {
			t.Errorf("%s (%d) is not refused", name, nr)
		}
	}
	// As in docker.
	for name, nr := range map[string]uint32{"ptrace": unix.SYS_PTRACE, "chroot": unix.SYS_CHROOT, "setuid": unix.SYS_SETUID,
		"pidfd_open": unix.SYS_PIDFD_OPEN, "read": unix.SYS_READ, "execve": unix.SYS_EXECVE} {
		if slices.Contains(p.EPERM, nr) || slices.Contains(p.ENOSYS, nr) {
			t.Errorf("%s is refused", name)
		}
	}
}

func TestBoxCaps(t *testing.T) {
	// docker's default set (moby oci/caps), 0xa80425fb, without CAP_MKNOD.
	const docker = 1<<unix.CAP_CHOWN | 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_FSETID | 1<<unix.CAP_FOWNER |
		1<<unix.CAP_MKNOD | 1<<unix.CAP_NET_RAW | 1<<unix.CAP_SETGID | 1<<unix.CAP_SETUID | 1<<unix.CAP_SETFCAP |
		1<<unix.CAP_SETPCAP | 1<<unix.CAP_NET_BIND_SERVICE | 1<<unix.CAP_SYS_CHROOT | 1<<unix.CAP_KILL |
		1<<unix.CAP_AUDIT_WRITE
	if docker != 0xa80425fb {
		t.Fatalf("docker's set is %#x", docker)
	}
	if got, want := protocol.DefaultCaps, uint64(docker&^(1<<unix.CAP_MKNOD)); got != want {
		t.Fatalf("box caps %#x, want %#x", got, want)
	}
	for _, never := range []int{unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SYS_MODULE, unix.CAP_MKNOD,
		unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_DAC_READ_SEARCH, unix.CAP_NET_ADMIN, unix.CAP_SYSLOG} {
		if protocol.DefaultCaps&(1<<never) != 0 {
			t.Errorf("box caps include capability %d", never)
		}
	}
	// The table's numbers are the kernel's.
	for name, n := range map[string]int{"NET_ADMIN": unix.CAP_NET_ADMIN, "cap_sys_admin": unix.CAP_SYS_ADMIN,
		"CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE, "BPF": unix.CAP_BPF, "MKNOD": unix.CAP_MKNOD} {
		if got, ok := protocol.CapNumber(name); !ok || got != n {
			t.Errorf("CapNumber(%q) = %d, %v; want %d", name, got, ok, n)
		}
	}
	if protocol.AllCaps != 1<<(unix.CAP_LAST_CAP+1)-1 {
		t.Errorf("AllCaps %#x, kernel headers' last capability %d", protocol.AllCaps, unix.CAP_LAST_CAP)
	}
}

// TestSeccompInKernel installs the box's filter on one locked thread (with
// no_new_privs, so it needs no privileges) and checks what the kernel
// answers for calls that are harmless whatever the verdict.
func TestSeccompInKernel(t *testing.T) {
	prog := boxProg(t)
	dir := t.TempDir()
	type result struct {
		name string
		err  error
		want error
	}
	results := make(chan []result, 1)
	go func() {
		lockOffMainThread() // never unlocked: the thread ends with the goroutine
		var out []result
		check := func(name string, want error, trap uintptr, args ...uintptr) {
			var a [6]uintptr
			copy(a[:], args)
			r, _, errno := unix.RawSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
			var err error
			if errno != 0 {
				err = errno
			} else if trap == unix.SYS_PERSONALITY {
				unix.RawSyscall(unix.SYS_PERSONALITY, r, 0, 0) // restore
			}
			out = append(out, result{name, err, want})
		}
		defer func() { results <- out }()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			out = append(out, result{"no_new_privs", err, nil})
			return
		}
		if err := seccomp.Install(prog, 0); err != nil {
			out = append(out, result{"install", err, nil})
			return
		}
		fifo, _ := unix.BytePtrFromString(filepath.Join(dir, "fifo"))
		chr, _ := unix.BytePtrFromString(filepath.Join(dir, "chr"))
		fdcwd := unix.AT_FDCWD
		atFdcwd := uintptr(fdcwd)
		check("getpid", nil, unix.SYS_GETPID)
		check("x32 getpid", unix.EPERM, x32SyscallBit|unix.SYS_GETPID)
		check("personality(PER_BSD)", unix.EPERM, unix.SYS_PERSONALITY, 6)
		check("personality(query)", nil, unix.SYS_PERSONALITY, 0xffffffff)
		// No arguments: unfiltered, clone3(NULL, 0) is EINVAL, never a fork.
		check("clone3", unix.ENOSYS, unix.SYS_CLONE3, 0, 0)
		check("unshare(CLONE_NEWUSER)", unix.EPERM, unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
		check("keyctl", unix.EPERM, unix.SYS_KEYCTL, 0, 0)
		check("pidfd_getfd", unix.EPERM, unix.SYS_PIDFD_GETFD, 0, 0, 0)
		check("mknodat fifo", nil, unix.SYS_MKNODAT, atFdcwd, uintptr(unsafe.Pointer(fifo)), unix.S_IFIFO|0o600, 0)
		check("mknodat char", unix.EPERM, unix.SYS_MKNODAT, atFdcwd, uintptr(unsafe.Pointer(chr)), unix.S_IFCHR|0o600, 0x103)
		check("mount", unix.EPERM, unix.SYS_MOUNT, 0, 0, 0, 0, 0)
		check("bpf", unix.EPERM, unix.SYS_BPF, 0, 0, 0)
		runtime.KeepAlive(fifo)
		runtime.KeepAlive(chr)
	}()
	for _, r := range <-results {
		if r.err != r.want {
			t.Errorf("%s: %v, want %v", r.name, r.err, r.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "chr")); err == nil {
		t.Error("the character device was made")
	}
}
