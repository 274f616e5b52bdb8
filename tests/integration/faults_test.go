package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// A box that runs out of memory loses the process that asked for it (the
// guest's OOM killer; the agent, PID 1, is never its choice), and goes on.
func TestGuestOOM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// A string that doubles until the guest has no memory left for it.
	res, err := b.Run(ctx, sh(`awk 'BEGIN { s = "x"; while (1) s = s s }'`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != int(syscall.SIGKILL) && res.Code == 0 {
		t.Fatalf("a process growing without end in a 128 MiB box: exit %+v", res.ExitStatus)
	}
	t.Logf("OOM: exit %+v", res.ExitStatus)
	if res := runIn(t, b, sh("echo still here")); string(res.Stdout) != "still here\n" {
		t.Fatalf("after the OOM: %q", res.Stdout)
	}
}

// A box whose host file system fills up is stopped at its first write that
// does not fit (QEMU pauses the VM before the guest sees an error, so its
// ext4 stays consistent), and says why on every call; other boxes are
// unharmed, and once there is room again the box starts and writes. The
// home is on a small ext4 file system of its own (a loop mount: the test
// needs root, as CI has).
func TestHostDiskFull(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test mounts a small file system for the box's home: run it as root (CI does)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	must(t, os.Mkdir(mnt, 0o700))
	for _, c := range [][]string{{"truncate", "-s", "1200M", img}, {"mkfs.ext4", "-q", img}, {"mount", "-o", "loop", img, mnt}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	defer exec.Command("umount", "-l", mnt).Run()
	frt, err := boxlite.NewRuntime(boxlite.WithHome(filepath.Join(mnt, "home")))
	must(t, err)
	defer frt.Close()
	loadTestImage(t, frt)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, err := frt.Create(ctx, "alpine:latest", boxlite.WithMemoryMiB(256), boxlite.WithAutoRemove(false), boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}))
	must(t, err)
	defer b.Remove(context.Background(), true)
	must(t, b.Start(ctx)) // its disk is made: now fill the host
	// Leave the box 200 MiB of host space: ballast takes the rest.
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	ballast := filepath.Join(mnt, "ballast")
	if out, err := exec.Command("fallocate", "-l", fmt.Sprint(int64(st.Bavail)*st.Bsize-200<<20), ballast).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v: %s", err, out)
	}
	// The box's 4 GB disk is sparse: writing 400 MiB needs more than there is.
	_, err = b.Run(ctx, sh("dd if=/dev/urandom of=/fill bs=1M count=400 conv=fsync"))
	if !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "host file system") || !strings.Contains(err.Error(), "full") {
		t.Fatalf("writing past the host's free space: %v; want the box stopped, saying the host file system is full", err)
	}
	t.Log(err)
	if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("the next call: %v; want the same cause", err)
	}
	if res := runIn(t, shared, sh("echo unharmed")); string(res.Stdout) != "unharmed\n" {
		t.Fatalf("another box: %q", res.Stdout)
	}
	// Room again: the box starts (its ext4 replays its journal) and writes.
	// Whether /fill survived depends on whether its directory entry reached
	// the journal before the stop, which is timing: not checked.
	must(t, os.Remove(ballast))
	must(t, b.Start(ctx))
	if res := runIn(t, b, sh("echo after > /after && cat /after")); string(res.Stdout) != "after\n" {
		t.Fatalf("after the restart: %q %q", res.Stdout, res.Stderr)
	}
}

// A guest kernel that panics while the box runs (here told to panic on
// running out of memory) stops the box: the running exec and every later
// call fail with the box-stopped kind naming the panic, and the box starts
// again. Kernel arguments that would touch boxlite's own are refused.
func TestGuestKernelPanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, bad := range [][]string{{"boxlite.net=1.2.3.4/24"}, {"a b"}, {""}, {"x=\"y\""}} {
		if _, err := rt.Create(ctx, "alpine:latest", boxlite.WithKernelArgs(bad...)); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("kernel args %q: %v", bad, err)
		}
	}
	b, err := rt.Create(ctx, "alpine:latest", boxlite.WithMemoryMiB(128), boxlite.WithAutoRemove(false), boxlite.WithKernelArgs("sysctl.vm.panic_on_oom=1"),
		boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}))
	must(t, err)
	defer b.Remove(context.Background(), true)
	_, err = b.Run(ctx, sh(`awk 'BEGIN { s = "x"; while (1) s = s s }'`))
	if !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "Kernel panic") {
		t.Fatalf("the exec the panic ended: %v; want the box stopped, naming the kernel panic", err)
	}
	t.Log(err)
	if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "Kernel panic") {
		t.Fatalf("the next call: %v", err)
	}
	if res := runIn(t, shared, sh("echo unharmed")); string(res.Stdout) != "unharmed\n" {
		t.Fatalf("another box: %q", res.Stdout)
	}
	must(t, b.Start(ctx))
	if res := runIn(t, b, sh("cat /proc/sys/vm/panic_on_oom")); string(res.Stdout) != "1\n" {
		t.Fatalf("after the restart: %q", res.Stdout)
	}
}
