package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
	"github.com/boxlite/boxlite/tests/internal/proc"
)

// One box with 16 volumes: 14 read-write directories, one read-only
// directory and one single file.
func TestVolume(t *testing.T) {
	const rw = 14
	base := t.TempDir()
	os.Chmod(base, 0o755)
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []boxlite.BoxOption{boxlite.WithName("volumes")}
	dirs := make([]string, rw)
	for i := range dirs {
		dirs[i] = filepath.Join(base, "v"+strconv.Itoa(i))
		os.Mkdir(dirs[i], 0o755)
		opts = append(opts, boxlite.WithVolume(dirs[i], "/mnt/v"+strconv.Itoa(i), false))
	}
	roDir := filepath.Join(base, "ro")
	os.Mkdir(roDir, 0o755)
	os.WriteFile(filepath.Join(roDir, "keep"), []byte("unchanged\n"), 0o644)
	file := filepath.Join(base, "app.conf")
	os.WriteFile(file, []byte("host line\n"), 0o644)
	// Links a box must not follow to the host: absolute and relative, to a
	// file outside the volume.
	os.Symlink(secret, filepath.Join(dirs[0], "abs"))
	os.Symlink("../secret", filepath.Join(dirs[0], "rel"))
	opts = append(opts, boxlite.WithVolume(roDir, "/data/ro", true), boxlite.WithVolume(file, "/etc/app.conf", false))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", opts...)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer b.Remove(context.Background(), true)

	t.Run("BoxWritesAppearOnHost", func(t *testing.T) {
		res := runIn(t, b, sh(`for i in $(seq 0 13); do echo "box $i" > /mnt/v$i/from-box || exit 1; done`))
		if res.Code != 0 {
			t.Fatalf("code %d: %s", res.Code, res.Stderr)
		}
		for i, d := range dirs {
			got, err := os.ReadFile(filepath.Join(d, "from-box"))
			if err != nil || string(got) != fmt.Sprintf("box %d\n", i) {
				t.Fatalf("volume %d on the host: %q, %v", i, got, err)
			}
		}
	})
	t.Run("HostEditsAppearInBox", func(t *testing.T) {
		os.WriteFile(filepath.Join(dirs[1], "from-host"), []byte("host 1\n"), 0o644)
		os.WriteFile(file, []byte("host line 2\n"), 0o644)
		res := runIn(t, b, sh(`cat /mnt/v1/from-host && for i in $(seq 50); do grep -q "line 2" /etc/app.conf && exit 0; sleep 0.1; done; cat /etc/app.conf; exit 1`))
		if res.Code != 0 || !strings.HasPrefix(string(res.Stdout), "host 1\n") {
			t.Fatalf("code %d stdout %q stderr %q", res.Code, res.Stdout, res.Stderr)
		}
	})
	t.Run("SingleFile", func(t *testing.T) {
		res := runIn(t, b, sh(`echo "box line" >> /etc/app.conf`))
		got, _ := os.ReadFile(file)
		if res.Code != 0 || string(got) != "host line 2\nbox line\n" {
			t.Fatalf("code %d stderr %q; host file %q", res.Code, res.Stderr, got)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		res := runIn(t, b, sh(`cat /data/ro/keep; echo x > /data/ro/keep && echo WROTE; touch /data/ro/new && echo CREATED; rm /data/ro/keep && echo REMOVED; true`))
		if string(res.Stdout) != "unchanged\n" {
			t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
		}
		if got, _ := os.ReadFile(filepath.Join(roDir, "keep")); string(got) != "unchanged\n" {
			t.Fatalf("host file %q", got)
		}
		if _, err := os.Stat(filepath.Join(roDir, "new")); err == nil {
			t.Fatal("the box created a file in a read-only volume")
		}
	})
	t.Run("SymlinksStayInBox", func(t *testing.T) {
		res := runIn(t, b, sh(`cat /mnt/v0/abs /mnt/v0/rel 2>&1; readlink /mnt/v0/abs`))
		if strings.Contains(string(res.Stdout), "host secret") || !strings.Contains(string(res.Stdout), secret) {
			t.Fatalf("stdout %q", res.Stdout)
		}
	})
	t.Run("OwnedByHostUser", func(t *testing.T) {
		res := runIn(t, b, sh(`echo root > /mnt/v2/root-file && mkdir /mnt/v2/dir && chmod 777 /mnt/v2 && chown 1234:1234 /mnt/v2/root-file`))
		if res.Code != 0 {
			t.Fatalf("as root: code %d: %s", res.Code, res.Stderr)
		}
		res = runIn(t, b, boxlite.Command{Argv: []string{"sh", "-c", "id -u; echo user > /mnt/v2/user-file"}, User: "1000:1000"})
		if res.Code != 0 || strings.TrimSpace(string(res.Stdout)) != "1000" {
			t.Fatalf("as 1000: code %d: %s %s", res.Code, res.Stdout, res.Stderr)
		}
		for _, n := range []string{"root-file", "dir", "user-file"} {
			fi, err := os.Stat(filepath.Join(dirs[2], n))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
				t.Fatalf("%s is owned by %d:%d on the host, want the caller's %d:%d", n, st.Uid, st.Gid, os.Getuid(), os.Getgid())
			}
		}
	})
	// The host side: one daemon per access mode, each in a root holding
	// only its shares; the read-only one runs --readonly over read-only
	// binds, so the host refuses writes whatever the guest kernel does.
	t.Run("DaemonsConfined", func(t *testing.T) {
		pids := virtiofsdPids(t, b.Info().Runtime.ShimPid)
		if len(pids) != 2 {
			t.Fatalf("%d virtiofsd under the shim, want 2 (rw and ro)", len(pids))
		}
		for _, pid := range pids {
			proc := "/proc/" + strconv.Itoa(pid)
			cmdline, _ := os.ReadFile(proc + "/cmdline")
			ro := strings.Contains(string(cmdline), "--readonly")
			shares, err := os.ReadDir(proc + "/root/shares")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: rw + 1, true: 1}[ro]; len(shares) != want {
				t.Fatalf("daemon %d (readonly %v) sees %d shares, want %d", pid, ro, len(shares), want)
			}
			for _, d := range []string{"home", "root", "var", "work", "boot"} {
				if _, err := os.Lstat(proc + "/root/" + d); err == nil {
					t.Errorf("daemon %d sees /%s", pid, d)
				}
			}
			mi, _ := os.ReadFile(proc + "/mountinfo")
			for _, l := range strings.Split(string(mi), "\n") {
				f := strings.Fields(l)
				if len(f) > 5 && strings.HasPrefix(f[4], "/shares/") && ro != strings.HasPrefix(f[5], "ro") {
					t.Errorf("daemon %d (readonly %v) has %s mounted %s", pid, ro, f[4], f[5])
				}
			}
			status, _ := os.ReadFile(proc + "/status")
			if !strings.Contains(string(status), "NoNewPrivs:\t1") || !strings.Contains(string(status), "Seccomp:\t2") {
				t.Errorf("daemon %d: no_new_privs or seccomp missing:\n%s", pid, status)
			}
		}
	})
	t.Run("Info", func(t *testing.T) {
		info := b.Info()
		if len(info.Config.Volumes) != rw+2 || !info.Config.Volumes[rw].ReadOnly {
			t.Fatalf("volumes in info: %+v", info.Config.Volumes)
		}
		t.Logf("warnings: %q", info.Runtime.Warnings)
	})
	t.Run("DaemonsEndWithBox", func(t *testing.T) {
		pids := virtiofsdPids(t, b.Info().Runtime.ShimPid)
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				t.Errorf("virtiofsd %d still there after the box stopped", pid)
			}
		}
	})
}

func TestVolumeMissingHostPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	_, err := boxtest.CreateStarted(context.Background(), rt, "alpine:latest", boxlite.WithVolume(missing, "/data", false))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(fmt.Sprint(err), missing) {
		t.Fatalf("err %v, want not found naming %s", err, missing)
	}
	for _, g := range []string{"data", "/", "/proc/x", "/a/../b"} {
		_, err := boxtest.CreateStarted(context.Background(), rt, "alpine:latest", boxlite.WithVolume(t.TempDir(), g, false))
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("guest path %q: err %v, want invalid argument", g, err)
		}
	}
}

// virtiofsdPids lists the virtiofsd children of the shim.
func virtiofsdPids(t *testing.T, shim int) []int { return proc.ChildrenNamed(shim, "virtiofsd") }
