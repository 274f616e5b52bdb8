package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// TestExecRoot runs commands in a root of their own (Command.Root, what
// the containerd shim runs containers with): a busybox tree shared into the
// box over a volume, the box's /proc bound in, a directory of the box
// bound at /data, a user of the root's own /etc/passwd.
func TestExecRoot(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	root := filepath.Join(base, "c1", "rootfs")
	if err := boxtest.BusyboxRoot(root); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\napp:x:4321:4322::/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "marker"), []byte("container root\n"), 0o644)
	vol := filepath.Join(base, "c1", "vol")
	os.Mkdir(vol, 0o755)
	os.Chmod(vol, 0o777) // the command writes as uid 4321

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	box, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithVolume(base, "/c", false))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer box.Remove(context.Background(), true)

	cmd := boxlite.Command{Argv: []string{"sh", "-c", "id -u; cat /marker; test -e /home/box || echo not-the-box; " +
		"test -r /proc/self/status && echo proc; echo from-c1 > /data/w; cat /data/w"},
		Env: map[string]string{"PATH": "/bin"}, User: "app", Root: "/c/c1/rootfs",
		RootBinds: []boxlite.RootBind{{Source: "/c/c1/vol", Target: "/data"}}}
	res := runIn(t, box, cmd)
	want := "4321\ncontainer root\nnot-the-box\nproc\nfrom-c1\n"
	if res.Code != 0 || string(res.Stdout) != want {
		t.Fatalf("code %d stdout %q stderr %q, want %q", res.Code, res.Stdout, res.Stderr, want)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "w")); err != nil || strings.TrimSpace(string(b)) != "from-c1" {
		t.Errorf("the bound directory's write on the host: %q %v", b, err)
	}
	// A second command in the same root finds the binds there already.
	res = runIn(t, box, boxlite.Command{Argv: []string{"sh", "-c", "cat /data/w"}, Env: map[string]string{"PATH": "/bin"}, Root: "/c/c1/rootfs"})
	if res.Code != 0 || strings.TrimSpace(string(res.Stdout)) != "from-c1" {
		t.Errorf("second command: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	// Released, the root has none of the agent's mounts; a command there
	// readies it again.
	mounts := func() string {
		return strings.TrimSpace(string(runIn(t, box, sh("grep -c ' /c/c1/rootfs/' /proc/self/mountinfo || true")).Stdout))
	}
	if n := mounts(); n == "0" {
		t.Fatal("no mounts in the root before its release")
	}
	if err := box.ReleaseRoot(ctx, "/c/c1/rootfs"); err != nil {
		t.Fatal(err)
	}
	if n := mounts(); n != "0" {
		t.Errorf("%s mounts left in the root after its release", n)
	}
	res = runIn(t, box, boxlite.Command{Argv: []string{"sh", "-c", "cat /data/w"}, Env: map[string]string{"PATH": "/bin"}, Root: "/c/c1/rootfs",
		RootBinds: []boxlite.RootBind{{Source: "/c/c1/vol", Target: "/data"}}})
	if res.Code != 0 || strings.TrimSpace(string(res.Stdout)) != "from-c1" {
		t.Errorf("after the release: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	// Supplementary groups and rlimits (an OCI process's additionalGids and
	// rlimits): set before the program runs, a hard limit above the box's
	// default (4096 open files) included; as a user, in the root, on a
	// terminal too.
	limits := boxlite.Command{Argv: []string{"sh", "-c", "id -u; id -G; ulimit -Sn; ulimit -Hn; ulimit -Hc; pwd"},
		Env: map[string]string{"PATH": "/bin"}, User: "4321:4322", Root: "/c/c1/rootfs", Cwd: "/data",
		Groups: []uint32{4322, 700, 701}, Rlimits: []boxlite.Rlimit{{Type: "RLIMIT_NOFILE", Soft: 5000, Hard: 9000},
			{Type: "RLIMIT_CORE", Soft: 0, Hard: 1<<64 - 1}}}
	want = "4321\n4322 700 701\n5000\n9000\nunlimited\n/data\n"
	start := time.Now()
	res = runIn(t, box, limits)
	if res.Code != 0 || string(res.Stdout) != want {
		t.Errorf("groups and rlimits: code %d stdout %q stderr %q, want %q", res.Code, res.Stdout, res.Stderr, want)
	}
	t.Logf("a command with rlimits (through the exec gate): %v", time.Since(start))
	limits.Tty = true
	if res = runIn(t, box, limits); res.Code != 0 || strings.ReplaceAll(string(res.Stdout), "\r", "") != want {
		t.Errorf("groups and rlimits on a terminal: code %d stdout %q, want %q", res.Code, res.Stdout, want)
	}
	// The root's usage (Box.RootUsage, the containerd shim's Stats): a
	// shell that spun and holds 4 MB, and its sleep, measured from the
	// box; nothing of the box's own processes.
	busy, err := box.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c",
		"i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; a=$(head -c 4000000 /dev/zero | tr '\\0' x); sleep 60; echo ${#a}"},
		Env: map[string]string{"PATH": "/bin"}, Root: "/c/c1/rootfs"})
	if err != nil {
		t.Fatal(err)
	}
	var u boxlite.RootUsage
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if u, err = box.RootUsage(ctx, "/c/c1/rootfs"); err != nil {
			t.Fatal(err)
		}
		if u.Pids == 2 && u.Anon > 4_000_000 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("root usage: %+v", u)
	if u.Pids != 2 || u.UserUsec+u.SystemUsec == 0 || u.RSS < 4_000_000 || u.Anon < 4_000_000 || u.BoxMemory == 0 || u.RSS > u.BoxMemory {
		t.Errorf("root usage %+v: want the 2 processes, CPU time, 4 MB anonymous", u)
	}
	_ = busy.Kill()
	if _, err := busy.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if u, err = box.RootUsage(ctx, "/c/c1/rootfs"); err != nil || u.Pids != 0 || u.RSS != 0 {
		t.Errorf("root usage after the kill: %+v %v", u, err)
	}
	if _, err := box.RootUsage(ctx, "/c/missing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("usage of a missing root: %v", err)
	}
	for _, bad := range []boxlite.Rlimit{{Type: "RLIMIT_NOPE", Soft: 1, Hard: 1}, {Type: "RLIMIT_NOFILE", Soft: 2, Hard: 1}} {
		c := limits
		c.Rlimits = []boxlite.Rlimit{bad}
		if _, err := box.Run(ctx, c); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("rlimit %+v: %v, want invalid argument", bad, err)
		}
	}
	for _, bad := range []boxlite.Command{
		{Argv: []string{"sh"}, Root: "/c/missing"},
		{Argv: []string{"/bin/nothere"}, Root: "/c/c1/rootfs"},
	} {
		if _, err := box.Run(ctx, bad); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%q in %s: %v, want not found", bad.Argv, bad.Root, err)
		}
	}
	if _, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh"}, Root: "relative"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("relative root: %v", err)
	}
}
