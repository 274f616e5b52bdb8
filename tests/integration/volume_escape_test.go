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

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// TestVolumeEscape attacks volumes as root in a box would (issue 20):
//
//   - Box "attacker" (python:slim) has P/proj at /proj and P/proj/out at
//     /out, read-write, and a 4 MiB tmpfs at /small. It replaces /proj/out
//     with a symlink to a host folder holding a 0600 file, and does the same
//     to P/proj/c, the volume of box "victim": a second box whose parent
//     folder the attacker can write. Across a restart, neither box may reach
//     anything outside its configured folders: its start fails naming the
//     volume, the 0600 file is not read, nothing is written outside.
//   - Root in the attacker tries to leave set-uid, set-gid and device files
//     and file capabilities in P, and writes to a set-uid file the host had
//     there: no set-id bit, device or capability is there afterwards.
//   - Filling /small gets ENOSPC in the box, which keeps running.
//   - The victim's /lim has a 2 MiB size limit: writing past it stops the
//     box, saying why.
func TestVolumeEscape(t *testing.T) {
	needPython(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small tmpfs for a full host file system: run it as root (make test does)")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	outside := filepath.Join(base, "outside")
	secret := filepath.Join(outside, "secret")
	os.Mkdir(outside, 0o755)
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(base, "p")
	proj, out, c := filepath.Join(p, "proj"), filepath.Join(p, "proj", "out"), filepath.Join(p, "proj", "c")
	for _, d := range []string{out, c} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// A set-uid file the host put there: a write from the box clears the bit.
	if err := os.WriteFile(filepath.Join(proj, "host-suid"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(proj, "host-suid"), 0o4755)
	small := filepath.Join(base, "small")
	os.Mkdir(small, 0o755)
	if err := unix.Mount("tmpfs", small, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=0777"); err != nil {
		t.Fatalf("mount a 4 MiB tmpfs at %s: %v", small, err)
	}
	t.Cleanup(func() { unix.Unmount(small, unix.MNT_DETACH) })

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	type made struct {
		b   *boxlite.Box
		err error
	}
	starts := make(chan made, 2)
	go func() {
		b, err := boxtest.CreateStarted(ctx, rt, "python:slim", boxlite.WithName("vol-attacker"), boxlite.WithAutoRemove(false),
			boxlite.WithVolume(proj, "/proj", false), boxlite.WithVolume(out, "/out", false), boxlite.WithVolume(small, "/small", false))
		starts <- made{b, err}
	}()
	lim := filepath.Join(base, "lim")
	os.Mkdir(lim, 0o755)
	victim, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithName("vol-victim"), boxlite.WithAutoRemove(false), boxlite.WithVolume(c, "/c", false),
		boxlite.WithVolumeSpec(boxlite.Volume{HostPath: lim, GuestPath: "/lim", SizeLimitBytes: 2 << 20}))
	m := <-starts
	if m.b != nil {
		t.Cleanup(func() { m.b.Remove(context.Background(), true) })
	}
	if victim != nil {
		t.Cleanup(func() { victim.Remove(context.Background(), true) })
	}
	if err != nil || m.err != nil {
		t.Fatalf("create: victim %v, attacker %v", err, m.err)
	}
	attacker := m.b

	t.Run("NoSetIDOrDeviceOnHost", func(t *testing.T) {
		res := runIn(t, attacker, boxlite.Command{Argv: []string{"python3", "-c", setIDAttack}})
		t.Logf("in the box:\n%s%s", res.Stdout, res.Stderr)
		if res.Code != 0 {
			t.Fatalf("attack script: code %d", res.Code)
		}
		if !strings.Contains(string(res.Stdout), "chmod 0755 ok") {
			t.Errorf("an ordinary chmod failed")
		}
		// The box's own disk keeps set-id files: only the host is protected.
		if !strings.Contains(string(res.Stdout), "own disk 0o4755") {
			t.Errorf("set-uid on the box's own disk: want it kept")
		}
		found := 0
		filepath.Walk(p, func(path string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			found++
			if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeDevice|os.ModeCharDevice) != 0 {
				t.Errorf("%s is %v on the host", path, fi.Mode())
			}
			if n, _ := unix.Getxattr(path, "security.capability", make([]byte, 64)); n > 0 {
				t.Errorf("%s has file capabilities on the host", path)
			}
			return nil
		})
		if found < 8 {
			t.Errorf("only %d files under %s: the attack did not run", found, p)
		}
	})

	t.Run("FullHostFileSystem", func(t *testing.T) {
		res := runIn(t, attacker, sh(`dd if=/dev/zero of=/small/fill bs=64k count=200 2>&1; echo "dd exit $?"`))
		got := string(res.Stdout)
		if !strings.Contains(got, "No space left on device") || strings.Contains(got, "dd exit 0") {
			t.Fatalf("filling a 4 MiB volume: %q, want ENOSPC", got)
		}
		if res := runIn(t, attacker, sh(`rm /small/fill && echo ok > /small/after && cat /small/after`)); string(res.Stdout) != "ok\n" {
			t.Fatalf("after ENOSPC: code %d %q %q", res.Code, res.Stdout, res.Stderr)
		}
	})

	t.Run("SizeLimit", func(t *testing.T) {
		if res := runIn(t, victim, sh(`dd if=/dev/zero of=/lim/small bs=64k count=8 && sync`)); res.Code != 0 {
			t.Fatalf("under the limit: code %d %s", res.Code, res.Stderr)
		}
		// Past it: the box is stopped (the command may or may not return).
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		victim.Run(rctx, sh(`dd if=/dev/zero of=/lim/big bs=1M count=16; sync; sleep 60`))
		rcancel()
		for end := time.Now().Add(time.Minute); victim.Info().State != boxlite.StateStopped && time.Now().Before(end); {
			time.Sleep(200 * time.Millisecond)
		}
		info := victim.Info()
		if info.State != boxlite.StateStopped || !strings.Contains(info.LastExit, "/lim") || !strings.Contains(info.LastExit, "size limit") {
			t.Fatalf("state %s, last exit %q: want stopped for /lim's size limit", info.State, info.LastExit)
		}
		var used int64
		filepath.Walk(lim, func(_ string, fi os.FileInfo, err error) error {
			if err == nil {
				used += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
			return nil
		})
		t.Logf("stopped: %s; %d bytes in the folder (limit %d)", info.LastExit, used, 2<<20)
	})

	t.Run("SymlinkSwapAcrossRestart", func(t *testing.T) {
		// The attacker's own nested volume, and the victim's, become symlinks
		// to a host folder outside every volume.
		res := runIn(t, attacker, sh(`rm -rf /proj/out /proj/c && ln -s `+outside+` /proj/out && ln -s / /proj/c && ls -l /proj`))
		if res.Code != 0 {
			t.Fatalf("swap: code %d %s", res.Code, res.Stderr)
		}
		for _, b := range []*boxlite.Box{attacker, victim} {
			if err := b.Stop(ctx); err != nil {
				t.Fatalf("stop %s: %v", b.Info().Name, err)
			}
		}
		for _, c := range []struct {
			b               *boxlite.Box
			guest, hostPath string
			probe           string
		}{
			{attacker, "/out", out, "cat /out/secret; touch /out/written; ls /out"},
			{victim, "/c", c, "cat /c" + outside + "/secret; touch /c/written /c" + outside + "/written; ls /c"},
		} {
			err := c.b.Start(ctx)
			if err == nil {
				// The box started: it must see only its folders.
				res := runIn(t, c.b, sh(c.probe))
				t.Errorf("%s started after the swap: %q %q", c.b.Info().Name, res.Stdout, res.Stderr)
				continue
			}
			t.Logf("%s: %v", c.b.Info().Name, err)
			if !strings.Contains(err.Error(), "volume "+c.guest) || !strings.Contains(err.Error(), c.hostPath) {
				t.Errorf("%s: start error %q does not name volume %s (%s)", c.b.Info().Name, err, c.guest, c.hostPath)
			}
			if !errors.Is(err, errdefs.ErrInvalidState) {
				t.Errorf("%s: start error %v is not ErrInvalidState", c.b.Info().Name, err)
			}
		}
		ents, _ := os.ReadDir(outside)
		if len(ents) != 1 {
			t.Errorf("the host folder outside holds %d entries, want only the secret", len(ents))
		}
		for _, w := range []string{"/written", filepath.Join(outside, "written")} {
			if _, err := os.Lstat(w); err == nil {
				t.Errorf("%s was written on the host", w)
			}
		}
		var st unix.Stat_t
		if unix.Stat(secret, &st) == nil && st.Mode&0o777 != 0o600 {
			t.Errorf("secret's mode changed to %#o", st.Mode&0o777)
		}
	})
}

// setIDAttack runs as root in the box against the read-write volume /proj:
// every way to a set-id file, a device node or file capabilities.
const setIDAttack = `
import os, stat, subprocess, tarfile
d = "/proj"
def tryit(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, e.strerror)
open(d + "/plain", "w").close()
tryit("chmod 0755", lambda: os.chmod(d + "/plain", 0o755))
tryit("chmod u+s", lambda: os.chmod(d + "/plain", 0o4755))
tryit("chmod g+s", lambda: os.chmod(d + "/plain", 0o2755))
fd = os.open(d + "/plain", os.O_RDONLY)
tryit("fchmod 6755", lambda: os.fchmod(fd, 0o6755))
tryit("create 4755", lambda: os.close(os.open(d + "/created", os.O_CREAT | os.O_WRONLY, 0o4755)))
tryit("mkdir 2775", lambda: os.mkdir(d + "/sgid-dir", 0o2775))
tryit("mknod char", lambda: os.mknod(d + "/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
tryit("mknod block", lambda: os.mknod(d + "/vda", 0o666 | stat.S_IFBLK, os.makedev(254, 0)))
tryit("mknod fifo 4755", lambda: os.mknod(d + "/fifo", 0o4755 | stat.S_IFIFO))
tryit("setxattr capability", lambda: os.setxattr(d + "/plain", "security.capability", b"\x01\x00\x00\x02" + b"\x00" * 16))
# A set-uid file made on the box's own disk, then copied and unpacked in.
open("/tmp/suid", "w").write("#!/bin/sh\nid\n")
os.chmod("/tmp/suid", 0o4755)
print("own disk", oct(os.stat("/tmp/suid").st_mode & 0o7777))
subprocess.run(["cp", "-p", "/tmp/suid", d + "/copied"])
with tarfile.open("/tmp/t.tar", "w") as t:
    t.add("/tmp/suid", arcname="unpacked")
subprocess.run(["tar", "-xpf", "/tmp/t.tar", "-C", d])
# A set-uid file the host had there before: a write clears the bit.
open(d + "/host-suid", "a").write("more\n")
for n in sorted(os.listdir(d)):
    st = os.lstat(d + "/" + n)
    print("after", n, oct(st.st_mode))
`
