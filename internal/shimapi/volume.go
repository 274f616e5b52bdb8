package shimapi

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Volume is a host file or directory mounted in the box at GuestPath (an
// absolute path in the box), read-only or read-write.
//
// A volume is its host file, not its path: the runtime resolves HostPath
// once, when the box is created (symlinks and all), and records the file's
// identity in HostID. Every start opens HostPath following no symlink and
// refuses it unless it is still that file (OpenVolume), then hands the
// file daemon the open descriptor, so nothing the box (or another box)
// does to the path between starts can point a volume elsewhere.
type Volume struct {
	HostPath  string `json:"host_path"`
	GuestPath string `json:"guest_path"`
	ReadOnly  bool   `json:"read_only,omitempty"`
	// HostID is the host file's identity, recorded at create. Nil in a box
	// created by a boxlite that did not record it: such a volume is still
	// opened following no symlink at every start, but not compared.
	HostID *FileID `json:"host_id,omitempty"`
	// SizeLimitBytes bounds what the box may store in a read-write
	// directory volume (see the shim's volume watcher); 0 is no limit.
	SizeLimitBytes int64 `json:"size_limit_bytes,omitempty"`
}

// FileID identifies a host file while it exists: its device and inode
// numbers (stat's st_dev and st_ino) and its type.
type FileID struct {
	Device uint64 `json:"device"`
	Inode  uint64 `json:"inode"`
	Type   string `json:"type"` // "dir" or "file" (regular)
}

func (id FileID) String() string {
	return fmt.Sprintf("%s on device %d:%d, inode %d", id.Type, unix.Major(id.Device), unix.Minor(id.Device), id.Inode)
}

// VolumeError is a volume whose host file cannot be used: missing, not a
// directory or regular file, reached through a symlink, or not the file
// recorded at create. It unwraps to an errdefs kind: ErrNotFound for a
// missing file, ErrInvalidState for a symlink or a changed file,
// ErrInvalidArgument otherwise.
type VolumeError struct {
	GuestPath, HostPath string
	Err                 error
}

func (e *VolumeError) Error() string {
	return fmt.Sprintf("volume %s (host path %q): %v", e.GuestPath, e.HostPath, e.Err)
}

func (e *VolumeError) Unwrap() error { return e.Err }

// OpenVolume opens v.HostPath with O_PATH, following no symlink on the way
// (OpenNoSymlinks), and checks that it is a directory or regular file and,
// when v.HostID is set, that same file. It returns the descriptor and the
// file's identity, or a *VolumeError.
func OpenVolume(v Volume) (*os.File, FileID, error) {
	bad := func(kind error, format string, a ...any) (*os.File, FileID, error) {
		return nil, FileID{}, &VolumeError{GuestPath: v.GuestPath, HostPath: v.HostPath, Err: errdefs.Errorf(kind, format, a...)}
	}
	f, err := OpenNoSymlinks(v.HostPath)
	switch {
	case errors.Is(err, unix.ENOENT):
		return bad(errdefs.ErrNotFound, "does not exist")
	case errors.Is(err, unix.ELOOP):
		return bad(errdefs.ErrInvalidState, "a symlink is on the way (%v); the volume was a plain path when the box was created", err)
	case err != nil:
		return bad(errdefs.ErrInvalidArgument, "%v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return bad(errdefs.ErrInvalidArgument, "fstat: %v", err)
	}
	id := FileID{Device: st.Dev, Inode: st.Ino}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		id.Type = "dir"
	case unix.S_IFREG:
		id.Type = "file"
	default:
		f.Close()
		return bad(errdefs.ErrInvalidArgument, "not a directory or regular file (mode %#o)", st.Mode)
	}
	if v.HostID != nil && *v.HostID != id {
		f.Close()
		return bad(errdefs.ErrInvalidState, "not the file the box was created with (%v), now %v; remove and recreate the box to use what is there now", *v.HostID, id)
	}
	return f, id, nil
}

// OpenNoSymlinks opens the absolute path with O_PATH|O_CLOEXEC following
// no symlink, not even the last component: openat2 with
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, or, where openat2 is missing
// (before Linux 5.6), one O_NOFOLLOW openat per component. A symlink on
// the way is an error wrapping ELOOP.
func OpenNoSymlinks(path string) (*os.File, error) {
	fd, err := OpenNoSymlinksFD(path)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenNoSymlinksFD is OpenNoSymlinks's descriptor, for code that must not
// leave a descriptor to the garbage collector (the jail's helper).
func OpenNoSymlinksFD(path string) (int, error) {
	if !strings.HasPrefix(path, "/") {
		return -1, fmt.Errorf("%q is not absolute: %w", path, unix.EINVAL)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == unix.ENOSYS {
		fd, err = walkNoFollow(path)
	}
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is a symlink: %w", path, unix.ELOOP)
	}
	return fd, nil
}

// walkNoFollow opens path one component at a time with O_NOFOLLOW.
func walkNoFollow(path string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, name := range parts {
		if name == "" && len(parts) == 1 {
			break // "/"
		}
		if name == "" || name == "." || name == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%q is not a clean path: %w", path, unix.EINVAL)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK && i < len(parts)-1 {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: a component is a symlink: %w", path, unix.ELOOP)
		}
	}
	return fd, nil
}
