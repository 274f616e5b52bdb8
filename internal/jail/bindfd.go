package jail

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/shimapi"
)

// Binds from a descriptor (Bind.File): the caller opened the source (and
// checked it, e.g. with no symlink on the way), and the jail binds that
// very file, resolving no host path on the way.
//
// mount(2) takes a bind source only from the caller's own mount namespace,
// and the helper has a new one, so a descriptor of the caller's cannot be
// bound there as it is. Two ways:
//
//   - A root caller makes a detached copy of the source's mount at Start
//     (open_tree with OPEN_TREE_CLONE, Linux 5.2) and the stage moves it into
//     the new root (move_mount): no path at all.
//   - Otherwise (a non-root caller may not make detached mounts; a kernel
//     without open_tree) the stage opens Host in its own namespace, without
//     following symlinks, and binds it only if it is the same inode as the
//     caller's descriptor (same device and inode number; the descriptor pins
//     the inode, so its number cannot have been reused), else fails with
//     ESTALE naming the bind.

// openTree is unix.OpenTree; tests replace it to take the other way.
var openTree = unix.OpenTree

// bindSources fills w.BindFDs and w.BindTrees and c.bindFiles (passed
// after the status pipe) for the binds with a File; done closes what it
// made, once the helper has its copies. Where open_tree fails (an old
// kernel, no CAP_SYS_ADMIN) the stage takes the other way.
func (c *Cmd) bindSources(w *wireSpec) (done func()) {
	var made []*os.File
	c.bindFiles = nil
	for i, b := range c.spec.Binds {
		if b.File == nil {
			continue
		}
		if w.BindFDs == nil {
			w.BindFDs = make([]int, len(c.spec.Binds))
			w.BindTrees = make([]bool, len(c.spec.Binds))
		}
		src := b.File
		if c.root {
			fd, err := openTree(int(b.File.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
			if err == nil {
				src = os.NewFile(uintptr(fd), "bind-tree-"+b.Inside)
				made = append(made, src)
				w.BindTrees[i] = true
			}
		}
		// The stage's descriptors: ExtraFiles, the spec and status pipes,
		// then these.
		w.BindFDs[i] = 3 + len(c.spec.ExtraFiles) + 2 + len(c.bindFiles)
		c.bindFiles = append(c.bindFiles, src)
	}
	return func() {
		for _, f := range made {
			f.Close()
		}
	}
}

// bindFromFD checks the source descriptor of bind b in the stage, before
// the pivot: it must be a directory or regular file. It returns the mount
// to make, from a detached tree, or from a descriptor of the stage's own
// namespace to the same inode.
func bindFromFD(b Bind, fd int, tree bool) (mnt, error) {
	step := "bind " + b.Host
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return mnt{}, fail(step, err)
	}
	typ := st.Mode & unix.S_IFMT
	if typ != unix.S_IFDIR && typ != unix.S_IFREG {
		return mnt{}, fail(step, fmt.Errorf("not a file or directory (mode %#o): %w", st.Mode, unix.EINVAL))
	}
	m := mnt{src: b.Host, dst: b.Inside, dir: typ == unix.S_IFDIR, writable: b.Writable, fd: fd, tree: tree}
	if tree {
		return m, nil
	}
	own, err := shimapi.OpenNoSymlinksFD(b.Host)
	if err != nil {
		return mnt{}, fail(step, err)
	}
	var now unix.Stat_t
	if err := unix.Fstat(own, &now); err != nil {
		unix.Close(own)
		return mnt{}, fail(step, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		unix.Close(own)
		return mnt{}, fail(step, fmt.Errorf("the path no longer leads to the file the caller opened (device %d inode %d, now %d/%d): %w",
			st.Dev, st.Ino, now.Dev, now.Ino, unix.ESTALE))
	}
	m.fd = own // close-on-exec: gone once the program runs
	return m, nil
}
