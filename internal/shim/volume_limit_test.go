package shim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func blocks(t *testing.T, p string) int64 {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// measure counts what du would: every inode under the volume once, not
// what symlinks point at.
func TestVolumeLimitMeasure(t *testing.T) {
	base := t.TempDir()
	vol, outside := filepath.Join(base, "vol"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(vol, "a", "b"), 0o755)
	os.Mkdir(outside, 0o755)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 1
	}
	os.WriteFile(filepath.Join(vol, "a", "b", "f"), big, 0o644)
	os.WriteFile(filepath.Join(vol, "g"), big[:4096], 0o644)
	os.Link(filepath.Join(vol, "g"), filepath.Join(vol, "a", "g-link"))
	os.WriteFile(filepath.Join(outside, "huge"), append(big, big...), 0o644)
	os.Symlink(outside, filepath.Join(vol, "out-link"))
	os.Symlink(filepath.Join(outside, "huge"), filepath.Join(vol, "huge-link"))

	var want int64
	for _, p := range []string{"", "a", "a/b", "a/b/f", "g", "out-link", "huge-link"} {
		want += blocks(t, filepath.Join(vol, p))
	}
	f, err := os.OpenFile(vol, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := newVolumeLimit("/vol", 1<<20, f)
	if err != nil {
		t.Fatal(err)
	}
	defer l.dir.Close()
	got, err := l.measure()
	if err != nil || got != want {
		t.Fatalf("measure: %d, %v; want %d", got, err, want)
	}

	// A tree deeper than the walker goes is an error, not a pass.
	// Made one level at a time: the path is longer than PATH_MAX.
	fd, _ := unix.Open(vol, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	for i := 0; i <= limitMaxDepth+1; i++ {
		unix.Mkdirat(fd, "d", 0o755)
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	if _, err := l.measure(); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("deep tree: %v, want an error", err)
	}
	os.RemoveAll(filepath.Join(vol, "d"))

	// A directory its owner cannot read, as a non-root caller's box could
	// make to hide data: an error. (Root reads it anyway.)
	if os.Geteuid() != 0 {
		os.Mkdir(filepath.Join(vol, "hidden"), 0o300)
		if _, err := l.measure(); err == nil {
			t.Fatal("unreadable directory: measured")
		}
	}
}
