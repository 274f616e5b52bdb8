package jail

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// TestVMMPolicy checks that this arch's table builds (TestConfined checks
// the kernel's answers in a jailed process).
func TestVMMPolicy(t *testing.T) {
	if seccompArch == 0 {
		t.Skip("no filter for this architecture")
	}
	p := vmmPolicy()
	prog, err := seccomp.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instructions", len(prog))
	for _, nr := range []uint32{unix.SYS_PTRACE, unix.SYS_MOUNT, unix.SYS_UNSHARE, unix.SYS_BPF, unix.SYS_PROCESS_VM_WRITEV} {
		if !slices.Contains(p.EPERM, nr) {
			t.Errorf("syscall %d is not refused with EPERM", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_CLONE3, unix.SYS_IO_URING_SETUP} {
		if !slices.Contains(p.ENOSYS, nr) {
			t.Errorf("syscall %d is not refused with ENOSYS", nr)
		}
	}
	if p.ForeignArch != seccomp.RetKill || p.Clone != unix.SYS_CLONE {
		t.Errorf("other arches %#x, clone rule %d; want killed and clone's flags checked", p.ForeignArch, p.Clone)
	}
}

// TestFSPolicy checks that the file daemon's table builds on this arch
// (TestDenySetID checks the kernel's answers).
func TestFSPolicy(t *testing.T) {
	if seccompArch == 0 {
		t.Skip("no filter for this architecture")
	}
	p := fsPolicy()
	prog, err := seccomp.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instructions", len(prog))
	if !slices.Contains(p.ENOSYS, unix.SYS_OPENAT2) || p.Mknodat != unix.SYS_MKNODAT || len(p.ArgRules) == 0 {
		t.Errorf("openat2 ENOSYS %v, mknodat rule %d, %d argument rules", slices.Contains(p.ENOSYS, unix.SYS_OPENAT2), p.Mknodat, len(p.ArgRules))
	}
	if v := vmmPolicy(); len(v.ArgRules) != 0 || slices.Contains(v.ENOSYS, unix.SYS_OPENAT2) {
		t.Error("the VMM's policy got the file daemon's rules")
	}
}
