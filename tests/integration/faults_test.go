package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/errdefs"
)

// A box that runs out of memory loses the process that asked for it (the
// guest's OOM killer; the agent, PID 1, is never its choice), and goes on.
func TestGuestOOM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := rt.Create(ctx, "alpine:latest", core.WithMemoryMiB(128))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// tail keeps a line that never ends in memory until it has it all.
	res, err := b.Run(ctx, sh("head -c 1000000000 /dev/zero | tail -c 1 >/dev/null"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != int(syscall.SIGKILL) && res.Code == 0 {
		t.Fatalf("a process asking for 1 GB in a 128 MiB box: exit %+v", res.ExitStatus)
	}
	t.Logf("OOM: exit %+v", res.ExitStatus)
	if res := runIn(t, b, sh("echo still here")); string(res.Stdout) != "still here\n" {
		t.Fatalf("after the OOM: %q", res.Stdout)
	}
}

// A host disk that fills under a box's disk is an I/O error inside that box,
// not a VM that QEMU pauses without a word; other boxes are unharmed.
func TestHostDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small tmpfs for a home and must run as root (make test does)")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Room for the image and the box's files, and 512 MiB (the start's
	// floor) plus a little for the disk to grow into.
	if err := syscall.Mount("tmpfs", home, "tmpfs", 0, "size=700m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(home, syscall.MNT_DETACH)
	r, err := core.NewRuntime(core.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	loadTestImage(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := r.Create(ctx, "alpine:latest", core.WithMemoryMiB(128))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	res, err := b.Run(ctx, sh("dd if=/dev/zero of=/root/fill bs=1M count=900 conv=fsync 2>&1; echo status $?; sync"))
	if err != nil {
		t.Fatalf("filling the disk: %v", err)
	}
	out := string(res.Stdout)
	if strings.Contains(out, "status 0") || !(strings.Contains(out, "I/O error") || strings.Contains(out, "No space")) {
		t.Fatalf("writing 900 MB onto a disk the host cannot hold: %q", out)
	}
	t.Logf("in the box: %s", strings.TrimSpace(out))
	// The box still answers (its VM was not paused), and so do others.
	if _, err := b.Run(ctx, sh("rm -f /root/fill; echo ok")); err != nil && !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("after the disk filled: %v", err)
	}
	if res := runIn(t, shared, sh("echo fine")); string(res.Stdout) != "fine\n" {
		t.Fatalf("another box: %q", res.Stdout)
	}
}
