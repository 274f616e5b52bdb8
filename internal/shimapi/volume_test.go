package shimapi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

func TestOpenVolume(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.MkdirAll(filepath.Join(real, "sub"), 0o755)
	os.WriteFile(filepath.Join(real, "f"), nil, 0o644)
	os.Symlink(real, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(real, "f"), filepath.Join(dir, "flink"))
	unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644)

	f, id, err := OpenVolume(Volume{HostPath: filepath.Join(real, "sub"), GuestPath: "/sub"})
	if err != nil || id.Type != "dir" {
		t.Fatalf("plain directory: %v %v", id, err)
	}
	f.Close()
	f, fid, err := OpenVolume(Volume{HostPath: filepath.Join(real, "f"), GuestPath: "/f"})
	if err != nil || fid.Type != "file" {
		t.Fatalf("plain file: %v %v", fid, err)
	}
	f.Close()
	if _, again, err := OpenVolume(Volume{HostPath: filepath.Join(real, "sub"), GuestPath: "/sub", HostID: &id}); err != nil || again != id {
		t.Fatalf("same directory with its identity: %v %v", again, err)
	}

	for _, c := range []struct {
		name string
		v    Volume
		kind error
	}{
		{"symlink in the middle", Volume{HostPath: filepath.Join(dir, "link", "sub")}, errdefs.ErrInvalidState},
		{"symlink at the end", Volume{HostPath: filepath.Join(dir, "link")}, errdefs.ErrInvalidState},
		{"file symlink", Volume{HostPath: filepath.Join(dir, "flink")}, errdefs.ErrInvalidState},
		{"another directory", Volume{HostPath: real, HostID: &id}, errdefs.ErrInvalidState},
		{"a file where a directory was", Volume{HostPath: filepath.Join(real, "f"), HostID: &FileID{Device: fid.Device, Inode: fid.Inode, Type: "dir"}}, errdefs.ErrInvalidState},
		{"missing", Volume{HostPath: filepath.Join(dir, "nope")}, errdefs.ErrNotFound},
		{"fifo", Volume{HostPath: filepath.Join(dir, "fifo")}, errdefs.ErrInvalidArgument},
		{"relative", Volume{HostPath: "real"}, errdefs.ErrInvalidArgument},
	} {
		c.v.GuestPath = "/g"
		f, _, err := OpenVolume(c.v)
		var ve *VolumeError
		if err == nil {
			f.Close()
		}
		if !errors.As(err, &ve) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), "volume /g") || !strings.Contains(err.Error(), c.v.HostPath) {
			t.Errorf("%s: %v, want a VolumeError naming /g and %s, kind %v", c.name, err, c.v.HostPath, c.kind)
		}
	}
}

// The walk used before openat2 existed refuses the same symlinks.
func TestWalkNoFollow(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "l"))
	fd, err := walkNoFollow(filepath.Join(dir, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	var st, want unix.Stat_t
	unix.Fstat(fd, &st)
	unix.Close(fd)
	unix.Stat(filepath.Join(dir, "a", "b"), &want)
	if st.Ino != want.Ino {
		t.Errorf("walk opened inode %d, want %d", st.Ino, want.Ino)
	}
	if fd, err := walkNoFollow(filepath.Join(dir, "l", "b")); !errors.Is(err, unix.ELOOP) {
		unix.Close(fd)
		t.Errorf("through a symlink: %v, want ELOOP", err)
	}
	if fd, err := walkNoFollow("/"); err != nil {
		t.Errorf("/: %v", err)
	} else {
		unix.Close(fd)
	}
}
