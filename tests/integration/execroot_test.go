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
