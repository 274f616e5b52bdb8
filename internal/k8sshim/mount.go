package k8sshim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// rootMount is one of the mounts containerd's snapshotter gives a
// container's root file system (types.Mount).
type rootMount struct {
	Type, Source string
	Options      []string
}

// mountFlags are the fstab options that are mount flags; the others are
// the file system's data.
var mountFlags = map[string]struct {
	clear bool
	flag  uintptr
}{
	"ro": {false, unix.MS_RDONLY}, "rw": {true, unix.MS_RDONLY},
	"bind": {false, unix.MS_BIND}, "rbind": {false, unix.MS_BIND | unix.MS_REC},
	"nosuid": {false, unix.MS_NOSUID}, "suid": {true, unix.MS_NOSUID},
	"nodev": {false, unix.MS_NODEV}, "dev": {true, unix.MS_NODEV},
	"noexec": {false, unix.MS_NOEXEC}, "exec": {true, unix.MS_NOEXEC},
	"sync": {false, unix.MS_SYNCHRONOUS}, "async": {true, unix.MS_SYNCHRONOUS},
	"noatime": {false, unix.MS_NOATIME}, "atime": {true, unix.MS_NOATIME},
	"nodiratime": {false, unix.MS_NODIRATIME}, "diratime": {true, unix.MS_NODIRATIME},
	"relatime": {false, unix.MS_RELATIME}, "norelatime": {true, unix.MS_RELATIME},
	"strictatime": {false, unix.MS_STRICTATIME},
	"defaults":    {false, 0},
}

// rootTypes are the mount types a snapshotter gives that the shim mounts.
var rootTypes = map[string]bool{"overlay": true, "bind": true, "rbind": true}

// parseOptions splits fstab options into flags and data.
func parseOptions(opts []string) (flags uintptr, data string) {
	var rest []string
	for _, o := range opts {
		if f, ok := mountFlags[o]; ok {
			if f.clear {
				flags &^= f.flag
			} else {
				flags |= f.flag
			}
			continue
		}
		rest = append(rest, o)
	}
	return flags, strings.Join(rest, ",")
}

// check refuses a mount the shim does not make, before anything is mounted.
func (m rootMount) check() error {
	if !rootTypes[m.Type] {
		return errdefs.Errorf(errdefs.ErrUnsupported, "rootfs: mount type %q (the shim mounts overlay and bind rootfs)", m.Type)
	}
	if m.Type != "overlay" && !strings.HasPrefix(m.Source, "/") {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "rootfs: bind source %q is not absolute", m.Source)
	}
	for _, o := range m.Options {
		if strings.ContainsRune(o, 0) || strings.Contains(o, ",") && m.Type != "overlay" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "rootfs: bad option %q", o)
		}
	}
	return nil
}

// mountRootfs mounts ms in order on target.
func mountRootfs(ms []rootMount, target string) error {
	for _, m := range ms {
		if err := m.check(); err != nil {
			return err
		}
	}
	for i, m := range ms {
		flags, data := parseOptions(m.Options)
		typ := m.Type
		if typ == "bind" || typ == "rbind" {
			typ = ""
			flags |= unix.MS_BIND
			if m.Type == "rbind" {
				flags |= unix.MS_REC
			}
		}
		ro := flags&unix.MS_RDONLY != 0
		if err := unix.Mount(m.Source, target, typ, flags, data); err != nil {
			unmountAll(target)
			return errdefs.Errorf(errdefs.ErrInternal, "rootfs: mount %d (%s %s) on %s: %v", i, m.Type, m.Source, target, err)
		}
		if flags&unix.MS_BIND != 0 && ro {
			// A bind takes no flags but MS_REC: make it read-only now.
			if err := unix.Mount("", target, "", flags|unix.MS_REMOUNT, ""); err != nil {
				unmountAll(target)
				return errdefs.Errorf(errdefs.ErrInternal, "rootfs: remount %s read-only: %v", target, err)
			}
		}
	}
	return nil
}

// unmountAll unmounts everything mounted on target (lazily: the box's file
// daemon may still hold files of it), and reports the first failure other
// than "nothing mounted there".
func unmountAll(target string) error {
	for i := 0; i < 64; i++ {
		err := unix.Unmount(target, unix.MNT_DETACH)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 64 unmounts", target)
}

// bindAt binds src (a directory or file, with what is mounted below it) at
// dst, read-only when asked, through a detached copy of the mount, so the
// bind is read-only from the moment it appears: dst is under the pod's
// shared directory, and what is mounted there propagates to the box's file
// daemon as it is.
func bindAt(src, dst string, readOnly bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	if readOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("make %s read-only: %w", src, err)
		}
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move the bind of %s to %s: %w", src, dst, err)
	}
	return nil
}

// makeShared makes dir a mount of its own with shared propagation: what is
// mounted below it later appears in the copies of it, the box's file
// daemon's included.
func makeShared(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// makeTarget makes the mount point p (a directory, or an empty file when
// file is set, with the directories above it) inside the container root at
// root, resolving every component inside root as the container would
// (openat2 RESOLVE_IN_ROOT: a symlink in the image never leads out). An
// existing p is left as it is.
func makeTarget(root, p string, file bool) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	comps := strings.Split(strings.Trim(filepath.Clean("/"+p), "/"), "/")
	dir := "."
	for i, c := range comps {
		next := filepath.Join(dir, c)
		fd, err := unix.Openat2(rfd, next, &how)
		if err == nil {
			unix.Close(fd)
			dir = next
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", next, err)
		}
		pfd, err := unix.Openat2(rfd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: how.Resolve})
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if i == len(comps)-1 && file {
			var fd int
			fd, err = unix.Openat(pfd, c, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
		} else {
			err = unix.Mkdirat(pfd, c, 0o755)
		}
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("make %s: %w", next, err)
		}
		// EEXIST from a dangling symlink: it must resolve now.
		if fd, err = unix.Openat2(rfd, next, &how); err != nil {
			return fmt.Errorf("%s: %w", next, err)
		}
		unix.Close(fd)
		dir = next
	}
	return nil
}
