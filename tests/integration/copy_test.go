package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// copyTree makes the test's host tree: a 64 MiB random file, an
// executable, a symlink, a hard link, a nested directory, set mtimes.
func copyTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "tree")
	must(t, os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o750))
	big := make([]byte, 64<<20)
	_, _ = rand.Read(big)
	must(t, os.WriteFile(filepath.Join(src, "big.bin"), big, 0o640))
	must(t, os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "sub", "deep", "note"), []byte("deep\n"), 0o600))
	must(t, os.Symlink("../run.sh", filepath.Join(src, "sub", "link")))
	must(t, os.Link(filepath.Join(src, "run.sh"), filepath.Join(src, "sub", "hard")))
	mt := time.Unix(1600000000, 250000000)
	must(t, os.Chtimes(filepath.Join(src, "big.bin"), mt, mt))
	must(t, os.Chtimes(filepath.Join(src, "sub", "deep"), mt, mt))
	return src
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sameTree compares two host trees: names, types, modes, mtimes, bytes, link targets.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	err := filepath.Walk(a, func(p string, fa os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		fb, err := os.Lstat(filepath.Join(b, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		n++
		if fa.Mode() != fb.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, fb.Mode(), fa.Mode())
		}
		if !fa.IsDir() && fa.Mode()&os.ModeSymlink == 0 && !fa.ModTime().Equal(fb.ModTime()) {
			t.Errorf("%s: mtime %v, want %v", rel, fb.ModTime(), fa.ModTime())
		}
		switch {
		case fa.Mode()&os.ModeSymlink != 0:
			la, _ := os.Readlink(p)
			lb, _ := os.Readlink(filepath.Join(b, rel))
			if la != lb {
				t.Errorf("%s: link %q, want %q", rel, lb, la)
			}
		case fa.Mode().IsRegular():
			da, _ := os.ReadFile(p)
			db, _ := os.ReadFile(filepath.Join(b, rel))
			if !bytes.Equal(da, db) {
				t.Errorf("%s: contents differ (%d vs %d bytes)", rel, len(db), len(da))
			}
		}
		return nil
	})
	must(t, err)
	if n < 7 {
		t.Fatalf("compared only %d entries", n)
	}
}

func copyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestCopy(t *testing.T) {
	ctx := copyCtx(t)
	src := copyTree(t)
	// The box needs no tar (nor a shell: the agent unit tests copy into an
	// empty root). The image's busybox tar applet is unlinked for the test.
	res := runIn(t, shared, sh("ls /bin/tar && rm /bin/tar; which tar || echo gone"))
	if string(res.Stdout) != "/bin/tar\ngone\n" {
		t.Fatalf("tar in the box: %q", res.Stdout)
	}
	t.Cleanup(func() { runIn(t, shared, sh("ln -s busybox /bin/tar")) })

	t.Run("RoundTrip", func(t *testing.T) {
		// The data crosses the box's lane (its host disk use seen as data
		// moves), which is punched empty after each copy.
		var progress []boxlite.CopyProgress
		var laneMax int64
		start := time.Now()
		must(t, shared.CopyIn(ctx, src, "/root/ct/", boxlite.CopyOptions{Progress: func(p boxlite.CopyProgress) {
			progress = append(progress, p)
			laneMax = max(laneMax, laneBytes(t, shared))
		}}))
		t.Logf("copy in of 64 MiB: %v", time.Since(start))
		checkLane(t, shared, "copy in", laneMax, true)
		if len(progress) < 2 || progress[len(progress)-1].Bytes < 64<<20 {
			t.Errorf("progress: %d calls, last %+v", len(progress), progress[len(progress)-1])
		}
		res := runIn(t, shared, sh("cd /root/ct/tree && ./run.sh && stat -c '%a %u:%g %Y %n' big.bin run.sh sub/deep && readlink sub/link && stat -c %h run.sh"))
		want := "ran\n640 0:0 1600000000 big.bin\n755 0:0 1600000000 run.sh\n750 0:0 1600000000 sub/deep\n../run.sh\n2\n"
		if got := string(res.Stdout); !strings.HasPrefix(got, "ran\n640 0:0 1600000000 big.bin\n755 0:0 ") || !strings.HasSuffix(got, "750 0:0 1600000000 sub/deep\n../run.sh\n2\n") {
			t.Fatalf("in the box:\n%s\nwant like:\n%s", got, want)
		}
		out := filepath.Join(t.TempDir(), "back")
		start = time.Now()
		laneMax = 0
		must(t, shared.CopyOut(ctx, "/root/ct/tree", out, boxlite.CopyOptions{Progress: func(boxlite.CopyProgress) { laneMax = max(laneMax, laneBytes(t, shared)) }}))
		t.Logf("copy out of 64 MiB: %v", time.Since(start))
		checkLane(t, shared, "copy out", laneMax, true)
		sameTree(t, src, out)
		a, _ := os.Stat(filepath.Join(out, "run.sh"))
		b, _ := os.Stat(filepath.Join(out, "sub", "hard"))
		if !os.SameFile(a, b) {
			t.Error("hard link not kept")
		}
	})

	t.Run("LaneHeld", func(t *testing.T) {
		// While another copy (here: the test) holds the lane, a copy
		// takes the channel: it works, and the lane stays empty.
		f, err := os.OpenFile(filepath.Join(shared.Info().Dir, shimapi.LaneFile), os.O_RDWR, 0)
		must(t, err)
		defer f.Close()
		must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
		var laneMax int64
		opts := boxlite.CopyOptions{Progress: func(boxlite.CopyProgress) { laneMax = max(laneMax, laneBytes(t, shared)) }}
		out := filepath.Join(t.TempDir(), "big.bin")
		must(t, shared.CopyOut(ctx, "/root/ct/tree/big.bin", out, opts))
		checkLane(t, shared, "copy out beside a held lane", laneMax, false)
		if a, b := fileSum(t, filepath.Join(src, "big.bin")), fileSum(t, out); a != b {
			t.Fatal("big.bin differs")
		}
		must(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
		laneRoundTrip(ctx, t, shared) // and the lane is free again
	})

	t.Run("Rules", func(t *testing.T) {
		dir := t.TempDir()
		f := filepath.Join(dir, "f.txt")
		must(t, os.WriteFile(f, []byte("hello"), 0o644))
		runIn(t, shared, sh("rm -rf /root/r && mkdir -p /root/r/dir && ln -s /root/r/dir /root/r/dirlink && ln -s / /root/r/up"))
		must(t, shared.CopyIn(ctx, f, "/root/r/dir", boxlite.CopyOptions{}))          // into a directory
		must(t, shared.CopyIn(ctx, f, "/root/r/new.txt", boxlite.CopyOptions{}))      // a new name
		must(t, shared.CopyIn(ctx, f, "/root/r/dirlink", boxlite.CopyOptions{}))      // a box symlink to a directory
		must(t, shared.CopyIn(ctx, f, "root/r/up/root/r/rel", boxlite.CopyOptions{})) // relative to /, through an absolute box link
		must(t, shared.CopyIn(ctx, src+"/sub/.", "/root/r/contents", boxlite.CopyOptions{}))
		res := runIn(t, shared, sh("cd /root/r && cat dir/f.txt new.txt rel && ls contents | tr '\\n' ' '"))
		if got := string(res.Stdout); got != "hellohellohellodeep hard link " {
			t.Fatalf("box tree: %q", got)
		}
		if err := shared.CopyIn(ctx, f, "/root/r/new.txt", boxlite.CopyOptions{NoOverwrite: true}); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("no overwrite: %v", err)
		}
		if err := shared.CopyIn(ctx, filepath.Join(dir, "missing"), "/root/r", boxlite.CopyOptions{}); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("missing source: %v", err)
		}
		if err := shared.CopyIn(ctx, src, "/root/r/x", boxlite.CopyOptions{NoRecursive: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("not recursive: %v", err)
		}
		if err := shared.CopyOut(ctx, "/no/such", filepath.Join(dir, "x"), boxlite.CopyOptions{}); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "/no/such") {
			t.Fatalf("missing box source: %v", err)
		}
		if err := shared.CopyOut(ctx, "/", filepath.Join(dir, "x"), boxlite.CopyOptions{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("root by name: %v", err)
		}
		must(t, shared.CopyOut(ctx, "/root/r/dir/f.txt", dir, boxlite.CopyOptions{})) // into an existing dir: replaces f.txt
		must(t, shared.CopyOut(ctx, "/root/r/up/root/r/dir/", filepath.Join(dir, "d2"), boxlite.CopyOptions{}))
		must(t, shared.CopyOut(ctx, "/root/r/dir/.", filepath.Join(dir, "d2"), boxlite.CopyOptions{})) // contents merged
		if b, _ := os.ReadFile(filepath.Join(dir, "d2", "f.txt")); string(b) != "hello" {
			t.Fatalf("d2/f.txt: %q", b)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Fatalf("host dir: %v", ents)
		}
		// Caps: nothing is left of a refused copy to a new name.
		err := shared.CopyOut(ctx, "/root/ct/tree", filepath.Join(dir, "capped"), boxlite.CopyOptions{MaxBytes: 1 << 20})
		if !errors.Is(err, errdefs.ErrLimit) {
			t.Fatalf("max bytes: %v", err)
		}
		if err := shared.CopyOut(ctx, "/root/ct/tree", filepath.Join(dir, "capped"), boxlite.CopyOptions{MaxEntries: 3}); !errors.Is(err, errdefs.ErrLimit) {
			t.Fatalf("max entries: %v", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Fatalf("a refused copy left %v", ents)
		}
		// The box still works after abandoned copies.
		runIn(t, shared, sh("true"))
	})

	t.Run("CLI", func(t *testing.T) {
		dir := t.TempDir()
		f := filepath.Join(dir, "cli.txt")
		must(t, os.WriteFile(f, []byte("via cli"), 0o604))
		if _, stderr, code := cli(t, "cp", f, "shared:/root/cli/"); code != 0 {
			t.Fatalf("cp in: exit %d: %s", code, stderr)
		}
		back := filepath.Join(dir, "back.txt")
		if _, stderr, code := cli(t, "cp", "shared:/root/cli/cli.txt", back); code != 0 {
			t.Fatalf("cp out: exit %d: %s", code, stderr)
		}
		if b, _ := os.ReadFile(back); string(b) != "via cli" {
			t.Fatalf("round trip: %q", b)
		}
		if fi, _ := os.Stat(back); fi.Mode() != 0o604 {
			t.Fatalf("mode %v", fi.Mode())
		}
		if _, stderr, code := cli(t, "cp", "shared:/no/such", back); code != 125 || !strings.Contains(stderr, "/no/such") {
			t.Fatalf("missing: exit %d: %s", code, stderr)
		}
		if _, _, code := cli(t, "cp", f, back); code != 125 {
			t.Fatalf("host to host: exit %d", code)
		}
	})

	t.Run("PlantedSymlinks", func(t *testing.T) {
		// Root in the box plants symlinks to host paths; copies into a
		// host directory that already holds links never write through them.
		victim := t.TempDir()
		runIn(t, shared, sh("rm -rf /evil && mkdir -p /evil/sub && echo x > /evil/sub/f && ln -s "+victim+" /evil/link && echo y > /evil/g"))
		out := t.TempDir()
		must(t, shared.CopyOut(ctx, "/evil", out, boxlite.CopyOptions{}))
		if l, _ := os.Readlink(filepath.Join(out, "evil", "link")); l != victim {
			t.Fatalf("link %q", l)
		}
		// The host now has out/evil/link -> victim. Make the box send link/f.
		runIn(t, shared, sh("rm /evil/link && mkdir /evil/link && echo z > /evil/link/f"))
		err := shared.CopyOut(ctx, "/evil", out, boxlite.CopyOptions{})
		if err == nil {
			// The link was replaced by a directory: never written through.
			if fi, err := os.Lstat(filepath.Join(out, "evil", "link")); err != nil || !fi.IsDir() {
				t.Fatalf("out/evil/link: %v %v", fi, err)
			}
		}
		must(t, os.Symlink(victim, filepath.Join(out, "evil", "sub2")))
		runIn(t, shared, sh("mkdir /evil/sub2 && echo w > /evil/sub2/f"))
		must(t, shared.CopyOut(ctx, "/evil", out, boxlite.CopyOptions{}))
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Fatalf("wrote through a symlink: %v", ents)
		}
	})

	t.Run("DestinationThroughSymlink", func(t *testing.T) {
		// A box symlink copied out becomes the destination of the next
		// copy out: refused, whoever made the link, and nothing lands
		// where it points. Modes lose the caller's umask.
		victim := t.TempDir()
		runIn(t, shared, sh("rm -rf /evil3 /loot && ln -s "+victim+" /evil3 && mkdir /loot && echo k > /loot/key && chmod 666 /loot/key && chmod 777 /loot"))
		out := t.TempDir()
		must(t, shared.CopyOut(ctx, "/evil3", filepath.Join(out, "data"), boxlite.CopyOptions{}))
		if l, _ := os.Readlink(filepath.Join(out, "data")); l != victim {
			t.Fatalf("out/data -> %q", l)
		}
		for _, dst := range []string{filepath.Join(out, "data"), filepath.Join(out, "data", "sub"), filepath.Join(out, "data") + "/"} {
			err := shared.CopyOut(ctx, "/loot/.", dst, boxlite.CopyOptions{})
			var se *filecopy.SymlinkError
			if !errors.As(err, &se) || !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), filepath.Join(out, "data")+" is a symlink") {
				t.Errorf("copy out to %s: %v", dst, err)
			}
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Fatalf("wrote through a symlink: %v", ents)
		}
		must(t, shared.CopyOut(ctx, "/loot", out, boxlite.CopyOptions{}))
		umask := os.FileMode(filecopy.Umask())
		for name, mode := range map[string]os.FileMode{"loot": 0o777 | os.ModeDir, "loot/key": 0o666} {
			fi, err := os.Lstat(filepath.Join(out, name))
			must(t, err)
			if fi.Mode() != mode&^umask {
				t.Errorf("%s: mode %v, want %v", name, fi.Mode(), mode&^umask)
			}
		}
	})
}

// laneBytes is the host disk the box's lane file uses.
func laneBytes(t *testing.T, b *boxlite.Box) int64 {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(b.Info().Dir, shimapi.LaneFile), &st); err != nil {
		t.Errorf("lane: %v", err)
		return 0
	}
	return st.Blocks * 512
}

// checkLane checks a copy's use of b's lane, seen at its
// progress calls (max): used or not, and empty after the copy either way.
func checkLane(t *testing.T, b *boxlite.Box, what string, max int64, used bool) {
	t.Helper()
	if used != (max > 0) {
		t.Errorf("%s: the lane held %d bytes at most while it ran; used: %v, want %v", what, max, max > 0, used)
	}
	if n := laneBytes(t, b); n != 0 {
		t.Errorf("%s: the lane holds %d bytes of host disk after the copy", what, n)
	}
}

func fileSum(t *testing.T, p string) [32]byte {
	b, err := os.ReadFile(p)
	must(t, err)
	return sha256.Sum256(b)
}

// laneRoundTrip copies a 3 MiB file into b and back, through its lane.
func laneRoundTrip(ctx context.Context, t *testing.T, b *boxlite.Box) {
	t.Helper()
	data := make([]byte, 3<<20+5)
	_, _ = rand.Read(data)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "lane.bin"), data, 0o600))
	var laneMax int64
	opts := boxlite.CopyOptions{Progress: func(boxlite.CopyProgress) { laneMax = max(laneMax, laneBytes(t, b)) }}
	must(t, b.CopyIn(ctx, filepath.Join(dir, "lane.bin"), "/root/", opts))
	checkLane(t, b, "copy in", laneMax, true)
	laneMax = 0
	must(t, b.CopyOut(ctx, "/root/lane.bin", filepath.Join(dir, "back.bin"), opts))
	checkLane(t, b, "copy out", laneMax, true)
	if got, _ := os.ReadFile(filepath.Join(dir, "back.bin")); !bytes.Equal(got, data) {
		t.Fatalf("box %s: the lane round trip changed the file (%d bytes, want %d)", b.ID(), len(got), len(data))
	}
}

// TestCopyChannel forces copies onto the channel (an agent or host
// without the lane does the same): the tree still round-trips, and the lane
// is never touched.
func TestCopyChannel(t *testing.T) {
	t.Setenv(boxlite.LaneEnv, "off")
	ctx := copyCtx(t)
	src := copyTree(t)
	var laneMax int64
	progress := boxlite.CopyOptions{Progress: func(boxlite.CopyProgress) { laneMax = max(laneMax, laneBytes(t, shared)) }}
	start := time.Now()
	must(t, shared.CopyIn(ctx, src, "/root/cc/", progress))
	t.Logf("copy in of 64 MiB over the channel: %v", time.Since(start))
	out := filepath.Join(t.TempDir(), "back")
	start = time.Now()
	must(t, shared.CopyOut(ctx, "/root/cc/tree", out, progress))
	t.Logf("copy out of 64 MiB over the channel: %v", time.Since(start))
	checkLane(t, shared, "channel copies", laneMax, false)
	sameTree(t, src, out)
	runIn(t, shared, sh("rm -rf /root/cc"))
}

// TestCopyHostileAgent plays a compromised agent answering copies out with
// hostile archives; each is refused with nothing written outside the
// destination, and a window overrun stops the box.
func TestCopyHostileAgent(t *testing.T) {
	exe, err := os.Executable()
	must(t, err)
	fake := filepath.Join(t.TempDir(), fakeQEMUPrefix+"copy")
	must(t, os.Link(exe, fake))
	frt, err := boxlite.NewRuntime(boxlite.WithHome(t.TempDir()), boxlite.WithQEMU(fake))
	must(t, err)
	defer frt.Close()
	loadTestImage(t, frt)
	ctx := copyCtx(t)
	b, err := boxtest.CreateStarted(ctx, frt, "alpine:latest", boxlite.WithBootTimeout(10*time.Second))
	must(t, err)
	cases := []struct {
		src  string
		kind error
		want string
	}{
		{"/dotdot", errdefs.ErrInvalidArgument, "unsafe path"},
		{"/absolute", errdefs.ErrInvalidArgument, "absolute path"},
		{"/through-symlink", errdefs.ErrInvalidArgument, "through a symlink"},
		{"/hardlink", errdefs.ErrInvalidArgument, "hard link"},
		{"/oversize", errdefs.ErrLimit, "more than"},
		{"/device", errdefs.ErrLimit, "entries"},
		{"/trailing", errdefs.ErrInvalidArgument, "after the end of the archive"},
		// Lane announcements outside what the host gave: the copy fails,
		// the box lives on.
		{"/lane-offset", errdefs.ErrInvalidArgument, "lane chunk of 10 bytes at offset 5242880"},
		{"/lane-outside", errdefs.ErrInvalidArgument, "lane chunk of 4096 bytes at offset 67108864"},
		{"/lane-length", errdefs.ErrInvalidArgument, "lane chunk of 1048577 bytes"},
		{"/lane-empty", errdefs.ErrInvalidArgument, "lane chunk of 0 bytes"},
	}
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	must(t, os.Mkdir(outside, 0o755))
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.src, "/"), func(t *testing.T) {
			dst := filepath.Join(top, "dst")
			must(t, os.MkdirAll(filepath.Join(dst, strings.TrimPrefix(c.src, "/")), 0o755)) // merge: entries land in place
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err := b.CopyOut(cctx, c.src, dst, boxlite.CopyOptions{MaxEntries: 1000})
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("copy out: %v; want %v naming %q", err, c.kind, c.want)
			}
			t.Log(err)
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("written outside: %v", ents)
			}
			if n := laneBytes(t, b); n != 0 { // what the box wrote there is gone
				t.Fatalf("the lane holds %d bytes after the copy", n)
			}
			for _, n := range []string{"evil", "etc"} {
				if _, err := os.Lstat(filepath.Join(top, n)); err == nil {
					t.Fatalf("%s written outside", n)
				}
			}
		})
	}
	// An honest-looking copy still works on the same box.
	out := filepath.Join(top, "ok")
	must(t, b.CopyOut(ctx, "/ok", out, boxlite.CopyOptions{}))
	if got, _ := os.ReadFile(out); string(got) != "fine" {
		t.Fatalf("ok copy: %q", got)
	}
	checkExecLaneHostile(ctx, t, b) // and execs whose stdout breaks the lane's rules
	// A window overrun stops the box: the copy fails, and so does every
	// later call, naming the violation. (Over the channel: a copy that
	// takes the lane may send no data frames at all.)
	t.Setenv(boxlite.LaneEnv, "off")
	err = b.CopyOut(ctx, "/overrun", filepath.Join(top, "o"), boxlite.CopyOptions{})
	if err == nil {
		t.Fatal("overrun: no error")
	}
	t.Logf("overrun: %v", err)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		err := b.CopyOut(ctx, "/ok", filepath.Join(top, "o2"), boxlite.CopyOptions{})
		if errors.Is(err, errdefs.ErrInvalidState) && strings.Contains(err.Error(), "overruns its window") {
			break
		}
		if time.Since(start) > 20*time.Second {
			log, _ := os.ReadFile(filepath.Join(b.Info().Dir, "shim.log"))
			t.Fatalf("after the overrun: %v\nshim log:\n%s", err, log)
		}
	}
}

// fakeCopy plays a compromised agent's side of copy streams (the fake
// QEMU's "copy" scenario): one copy out at a time, answered from a goroutine
// that respects the window, as the host credits it, and sends its data
// through the lane (fakeQEMU opens it) when the host asks for it.
var fakeCopy struct {
	sync.Mutex
	cond *sync.Cond
	win  map[uint32]int // by stream; gone once the host cancels
	lane *os.File
	// A lane copy's slots and those the host has freed, by stream.
	slots, free map[uint32]int
	execs       map[uint32]string // execs' names (execlane_test.go)
}

// fakeLane finds the lane's writable descriptor in QEMU's arguments: its
// drive's fd set, whose last fd is the read-write one.
func fakeLane(args []string) *os.File {
	set := ""
	for i, a := range args {
		if i > 0 && args[i-1] == "-device" && strings.Contains(a, "serial="+protocol.LaneSerial) {
			for _, opt := range strings.Split(a, ",") {
				if d, ok := strings.CutPrefix(opt, "drive=d"); ok {
					n, _ := strconv.Atoi(d)
					set = strconv.Itoa(n + 1)
				}
			}
		}
	}
	var f *os.File
	for i, a := range args {
		if i > 0 && args[i-1] == "-add-fd" && strings.HasSuffix(a, ",set="+set) {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(a, "fd="), ",set="+set))
			f = os.NewFile(uintptr(n), "lane")
		}
	}
	return f
}

func fakeCopyFrame(w *protocol.Writer, f protocol.Frame) {
	fakeCopy.Lock()
	defer fakeCopy.Unlock()
	if fakeCopy.cond == nil {
		fakeCopy.cond = sync.NewCond(&fakeCopy.Mutex)
		fakeCopy.win = map[uint32]int{}
		fakeCopy.slots, fakeCopy.free, fakeCopy.execs = map[uint32]int{}, map[uint32]int{}, map[uint32]string{}
	}
	defer fakeCopy.cond.Broadcast()
	switch f.Type {
	case protocol.TExec, protocol.TLaneGrant:
		fakeExecLane(w, f)
	case protocol.TCopyOut:
		var req protocol.CopyOut
		protocol.Decode(f, &req)
		fakeCopy.win[f.Stream] = protocol.InitialWindow
		if req.Lane > 0 && fakeCopy.lane != nil {
			fakeCopy.slots[f.Stream], fakeCopy.free[f.Stream] = req.Lane, req.Lane
		}
		go fakeCopyOut(w, f)
	case protocol.TLaneFree:
		var lf protocol.LaneFree
		protocol.Decode(f, &lf)
		if _, ok := fakeCopy.win[f.Stream]; ok {
			fakeCopy.free[f.Stream] += lf.Slots
		}
	case protocol.TCredit:
		var c protocol.Credit
		protocol.Decode(f, &c)
		if _, ok := fakeCopy.win[f.Stream]; ok {
			fakeCopy.win[f.Stream] += c.Bytes
		}
	case protocol.TCancel:
		delete(fakeCopy.win, f.Stream)
	}
}

func fakeSend(w *protocol.Writer, stream uint32, data []byte) bool {
	fakeCopy.Lock()
	slots := fakeCopy.slots[stream]
	fakeCopy.Unlock()
	if slots > 0 {
		return fakeLaneSend(w, stream, slots, data)
	}
	for len(data) > 0 {
		fakeCopy.Lock()
		win, ok := fakeCopy.win[stream]
		for ok && win <= 0 {
			fakeCopy.cond.Wait()
			win, ok = fakeCopy.win[stream]
		}
		if !ok {
			fakeCopy.Unlock()
			return false // cancelled
		}
		n := min(len(data), protocol.MaxChunk, win)
		fakeCopy.win[stream] -= n
		fakeCopy.Unlock()
		if err := w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: stream, Payload: data[:n]}); err != nil {
			os.Exit(0)
		}
		data = data[n:]
	}
	return true
}

// fakeLaneSend sends data through the lane, a slot at a time as the host
// frees them.
func fakeLaneSend(w *protocol.Writer, stream uint32, slots int, data []byte) bool {
	for i := 0; len(data) > 0; i++ {
		fakeCopy.Lock()
		_, ok := fakeCopy.win[stream]
		for ok && fakeCopy.free[stream] <= 0 {
			fakeCopy.cond.Wait()
			_, ok = fakeCopy.win[stream]
		}
		if !ok {
			fakeCopy.Unlock()
			return false // cancelled
		}
		fakeCopy.free[stream]--
		fakeCopy.Unlock()
		n := min(len(data), protocol.LaneSlot)
		off := int64(i%slots) * protocol.LaneSlot
		fakeCopy.lane.WriteAt(data[:n], off)
		fakeLaneChunk(w, stream, protocol.LaneChunk{Off: off, Len: n})
		data = data[n:]
	}
	return true
}

func fakeLaneChunk(w *protocol.Writer, stream uint32, ch protocol.LaneChunk) {
	f, _ := protocol.Encode(protocol.TLane, stream, ch)
	if err := w.WriteFrame(f); err != nil {
		os.Exit(0)
	}
}

// fakeCopyOut answers a copy out with a hostile archive chosen by the
// source path the test asks for.
func fakeCopyOut(w *protocol.Writer, f protocol.Frame) {
	var req protocol.CopyOut
	protocol.Decode(f, &req)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h tar.Header, body string) {
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(body))
		}
		tw.WriteHeader(&h)
		io.WriteString(tw, body)
	}
	name := strings.TrimPrefix(req.Src, "/")
	switch req.Src {
	case "/dotdot":
		add(tar.Header{Name: name + "/../../evil", Typeflag: tar.TypeReg}, "x")
	case "/absolute":
		add(tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg}, "x")
	case "/through-symlink":
		add(tar.Header{Name: name + "/l", Typeflag: tar.TypeSymlink, Linkname: "../../outside"}, "")
		add(tar.Header{Name: name + "/l/evil", Typeflag: tar.TypeReg}, "x")
	case "/hardlink":
		add(tar.Header{Name: name + "/h", Typeflag: tar.TypeLink, Linkname: name + "/../../outside"}, "")
	case "/oversize":
		tw.WriteHeader(&tar.Header{Name: name + "/big", Typeflag: tar.TypeReg, Size: 1 << 40, Mode: 0o644})
	case "/device":
		for i := 0; i < 5000; i++ {
			add(tar.Header{Name: name + "/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, "")
		}
	case "/trailing", "/ok":
		add(tar.Header{Name: name, Typeflag: tar.TypeReg}, "fine")
	case "/lane-offset", "/lane-outside", "/lane-length", "/lane-empty":
		// What the chunk claims to hold is in the lane, where it says.
		ch := map[string]protocol.LaneChunk{"/lane-offset": {Off: 5 * protocol.LaneSlot, Len: 10},
			"/lane-outside": {Off: shimapi.LaneSize, Len: 4096}, "/lane-length": {Off: 0, Len: protocol.LaneSlot + 1},
			"/lane-empty": {Off: 0, Len: 0}}[req.Src]
		add(tar.Header{Name: name, Typeflag: tar.TypeReg}, "fine")
		tw.Close()
		if ch.Off < shimapi.LaneSize { // QEMU writes nothing past the disk
			fakeCopy.lane.WriteAt(buf.Bytes(), ch.Off)
		}
		fakeLaneChunk(w, f.Stream, ch)
		return
	case "/overrun":
		// More than the window in one frame, before any credit: frame by
		// frame, a host that consumes fast enough could credit each in time
		// (or read zeros as the archive's end and drop the stream first).
		w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: f.Stream, Payload: make([]byte, 5*protocol.MaxChunk)})
		return
	}
	tw.Close()
	if req.Src == "/trailing" {
		buf.Write(bytes.Repeat([]byte{1}, 2<<20)) // junk after the archive's end
	}
	if fakeSend(w, f.Stream, buf.Bytes()) {
		done, _ := protocol.Encode(protocol.TCopyDone, f.Stream, protocol.CopyDone{})
		w.WriteFrame(done)
	}
}
