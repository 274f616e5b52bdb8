package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// libLinks are the top-level directories a program's loader may need. On a
// merged-/usr host they are symlinks into /usr and are recreated as such;
// otherwise they are bound read-only.
var libLinks = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// Paths in the helper's mount namespace while the root is built: the new
// root's tmpfs is mounted at staging/root, then staging becomes / and the
// host's root is at /old until it is detached.
const (
	stagingDir = "/tmp"
	oldDir     = "/old"
	newDir     = "/root"
)

// mnt is one mount to make in the new root.
type mnt struct {
	src      string // host path, symlinks resolved
	dst      string // path inside
	dir      bool
	writable bool
	device   bool   // keep device access (no nodev)
	link     string // create a symlink with this target instead of mounting
	fd       int    // > 0: bind this descriptor, not src (bindfd.go)
	tree     bool   // fd is a detached mount to move in
}

// buildRoot gives the process a new root holding only the system
// directories, the devices and the binds, and detaches the host's root.
// It runs in the helper's own mount namespace, before the uid change.
func buildRoot(s *wireSpec, l *Layers) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		if err == unix.EPERM || err == unix.EACCES {
			// Some hosts give a namespace without the right to mount in
			// it: Ubuntu's AppArmor restriction of user namespaces, a
			// container's AppArmor or seccomp profile.
			l.PivotRoot.Note = fmt.Sprintf("the host refuses mounts in the new namespace (%v)", err)
			return nil
		}
		return fail("make / private", err)
	}

	// Resolve everything against the host's root while it is still /.
	var ms []mnt
	if fi, err := os.Stat("/usr"); err == nil && fi.IsDir() {
		ms = append(ms, mnt{src: "/usr", dst: "/usr", dir: true})
	}
	for _, p := range libLinks {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return fail("readlink "+p, err)
			}
			ms = append(ms, mnt{dst: p, link: t})
		} else if fi.IsDir() {
			ms = append(ms, mnt{src: p, dst: p, dir: true})
		}
	}
	if fi, err := os.Stat("/etc/ld.so.cache"); err == nil && fi.Mode().IsRegular() {
		ms = append(ms, mnt{src: "/etc/ld.so.cache", dst: "/etc/ld.so.cache"})
	}
	nsys := len(ms)
	var nodes []node
	for _, d := range s.Devices {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return fail("device "+d, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR && st.Mode&unix.S_IFMT != unix.S_IFBLK {
			return fail("device "+d, fmt.Errorf("not a device node: %w", unix.EINVAL))
		}
		if s.SetID {
			nodes = append(nodes, node{path: d, mode: st.Mode, rdev: st.Rdev})
		} else {
			ms = append(ms, mnt{src: d, dst: d, writable: true, device: true})
		}
	}
	for i, b := range s.Binds {
		if i < len(s.BindFDs) && s.BindFDs[i] > 0 {
			m, err := bindFromFD(b, s.BindFDs[i], s.BindTrees[i])
			if err != nil {
				return err
			}
			ms = append(ms, m)
			continue
		}
		src, err := filepath.EvalSymlinks(b.Host)
		if err != nil {
			return fail("bind "+b.Host, unwrapPathErr(err))
		}
		fi, err := os.Stat(src)
		if err != nil {
			return fail("bind "+b.Host, unwrapPathErr(err))
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSocket == 0 {
			return fail("bind "+b.Host, fmt.Errorf("not a file, directory or socket (%v): %w", fi.Mode().Type(), unix.EINVAL))
		}
		ms = append(ms, mnt{src: src, dst: b.Inside, dir: fi.IsDir(), writable: b.Writable})
	}

	if fi, err := os.Stat(stagingDir); err != nil || !fi.IsDir() {
		return fail("staging", fmt.Errorf("%s is not a directory", stagingDir))
	}
	if err := unix.Mount("tmpfs", stagingDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
		return fail("mount staging tmpfs", err)
	}
	for _, d := range []string{oldDir, newDir} {
		if err := os.Mkdir(stagingDir+d, 0o700); err != nil {
			return fail("staging", err)
		}
	}
	if err := unix.Mount("tmpfs", stagingDir+newDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fail("mount root tmpfs", err)
	}
	if err := unix.PivotRoot(stagingDir, stagingDir+oldDir); err != nil {
		return fail("pivot_root to staging", err)
	}
	if err := os.Chdir("/"); err != nil {
		return fail("chdir /", err)
	}

	// System directories, /dev and /tmp first: binds may go below /tmp.
	for _, m := range ms[:nsys] {
		if err := mount(m); err != nil {
			return err
		}
	}
	if err := mkdirNoFollow(newDir+"/dev", 0o755); err != nil {
		return fail("mkdir /dev", err)
	}
	if s.SetID {
		if err := makeNodes(newDir+"/dev", nodes, s.UID, s.GID); err != nil {
			return err
		}
	}
	if err := mkdirNoFollow(newDir+"/tmp", 0o755); err != nil {
		return fail("mkdir /tmp", err)
	}
	if err := unix.Mount("tmpfs", newDir+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fail("mount /tmp", err)
	}
	for _, m := range ms[nsys:] {
		if err := mount(m); err != nil {
			return err
		}
	}

	if err := unix.Unmount(oldDir, unix.MNT_DETACH); err != nil {
		return fail("detach the host root", err)
	}
	if err := os.Chdir(newDir); err != nil {
		return fail("chdir new root", err)
	}
	// pivot_root(".", ".") stacks the staging root on the new one; the
	// detach then leaves only the new root.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fail("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fail("detach the staging root", err)
	}
	if err := os.Chdir("/"); err != nil {
		return fail("chdir /", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fail("remount / read-only", err)
	}
	l.PivotRoot = Layer{Applied: true, Note: fmt.Sprintf("/ is a read-only tmpfs with /usr, %d bind(s), %d device(s) and an empty /tmp (64 MiB)", len(s.Binds), len(s.Devices))}
	return nil
}

// node is a device node to create.
type node struct {
	path string
	mode uint32
	rdev uint64
}

// makeNodes mounts a tmpfs that allows devices at dir and creates the
// nodes there, owned by uid and gid with the host's permission bits, as
// Firecracker's jailer does: a bind of the host's node would keep the
// host's owner (/dev/kvm is root:kvm 0660), which the dropped uid cannot
// open. The tmpfs is then made read-only: the nodes stay usable, but
// cannot be changed or added to.
func makeNodes(dir string, nodes []node, uid, gid uint32) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fail("mount /dev", err)
	}
	for _, n := range nodes {
		p := newDir + n.path
		if err := unix.Mknod(p, n.mode, int(n.rdev)); err != nil {
			return fail("device "+n.path+": mknod", err)
		}
		if err := unix.Chown(p, int(uid), int(gid)); err != nil {
			return fail("device "+n.path+": chown", err)
		}
		if err := unix.Chmod(p, n.mode&0o777); err != nil {
			return fail("device "+n.path+": chmod", err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fail("remount /dev read-only", err)
	}
	return nil
}

// mount makes m under newDir, called after the pivot into the staging
// root: the host's files are under oldDir.
func mount(m mnt) error {
	dst := newDir + m.dst
	step := "bind " + m.src
	if m.src == "" {
		step = "symlink " + m.dst
	} else if m.src != m.dst {
		step += " to " + m.dst
	}
	if err := mkdirNoFollow(filepath.Dir(dst), 0o755); err != nil {
		return fail(step, err)
	}
	if m.link != "" {
		if err := os.Symlink(m.link, dst); err != nil {
			return fail(step, unwrapPathErr(err))
		}
		return nil
	}
	if m.dir {
		if err := os.Mkdir(dst, 0o755); err != nil && !os.IsExist(err) {
			return fail(step, unwrapPathErr(err))
		}
	} else {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fail(step, unwrapPathErr(err))
		}
		f.Close()
	}
	switch {
	case m.tree:
		if err := unix.MoveMount(m.fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fail(step+": move_mount", err)
		}
	case m.fd > 0:
		// The descriptor's magic link, through the host's /proc under
		// oldDir: the kernel binds the file it holds.
		if err := unix.Mount(fmt.Sprintf("%s/proc/self/fd/%d", oldDir, m.fd), dst, "", unix.MS_BIND, ""); err != nil {
			return fail(step, err)
		}
	default:
		if err := unix.Mount(oldDir+m.src, dst, "", unix.MS_BIND, ""); err != nil {
			return fail(step, err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fail(step, err)
	}
	// Keep the flags the source mount has: a user namespace may not clear
	// them, and nobody should.
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID)
	if !m.writable {
		flags |= unix.MS_RDONLY
	}
	if m.device {
		flags |= unix.MS_NOEXEC
	} else {
		flags |= unix.MS_NODEV
	}
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fail(step+": remount", err)
	}
	return nil
}

// mkdirNoFollow creates dir and its missing parents, refusing to go
// through a symlink (a writable bind could hold one).
func mkdirNoFollow(dir string, mode os.FileMode) error {
	if !strings.HasPrefix(dir, newDir) {
		return fmt.Errorf("%s outside the new root", dir)
	}
	p := newDir
	for _, c := range strings.Split(strings.TrimPrefix(dir, newDir), "/") {
		if c == "" {
			continue
		}
		p += "/" + c
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(p, mode); err != nil {
				return unwrapPathErr(err)
			}
		case err != nil:
			return unwrapPathErr(err)
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink: %w", strings.TrimPrefix(p, newDir), unix.ELOOP)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory: %w", strings.TrimPrefix(p, newDir), unix.ENOTDIR)
		}
	}
	return nil
}

// unwrapPathErr keeps the errno of a *PathError (so it crosses the status
// pipe) with the path in its text.
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
