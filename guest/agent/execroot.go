//go:build linux

package agent

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// rootBinds are the box's directories bound onto a container root
// (protocol.Exec.Root) the first time an exec uses it: the sandbox's own
// /proc (its PID namespace's), /dev (harmless devices, its /dev/pts) and
// read-only /sys, so the container's processes see the box's.
var rootBinds = []string{"proc", "dev", "sys"}

// checkRoot validates an Exec.Root as the request gives it.
func checkRoot(root string) error {
	switch {
	case len(root) > maxCwdLen || strings.ContainsRune(root, 0):
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: bad root %q", root)
	case !path.IsAbs(root) || path.Clean(root) == "/":
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root %q is not an absolute directory below /", root)
	}
	return nil
}

// containerRoot resolves the directory root of the box (symlinks kept
// inside the box) and readies it as a process root: it returns the
// agent's path to it (for looking up users, the cwd and the executable)
// and the box path to chroot to.
func (g *sandboxGen) containerRoot(root string) (agentPath, boxPath string, err error) {
	agentPath, err = resolveIn(g.root(), root)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(agentPath); err == nil && !fi.IsDir() {
			err = unix.ENOTDIR
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return "", "", errdefs.Errorf(errdefs.ErrNotFound, "exec: root %q: no such directory", root)
		}
		return "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root %q: %v", root, err)
	}
	boxPath = "/" + strings.TrimPrefix(strings.TrimPrefix(agentPath, g.root()), "/")
	if boxPath == "/" {
		return "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root %q is the box's own root", root)
	}
	g.rootsMu.Lock()
	defer g.rootsMu.Unlock()
	if g.roots[boxPath] {
		return agentPath, boxPath, nil
	}
	if err := g.onThread(func() error { return bindBoxDirs(boxPath) }); err != nil {
		return "", "", errdefs.Errorf(errdefs.ErrInternal, "exec: root %q: %v", root, err)
	}
	if g.roots == nil {
		g.roots = map[string]bool{}
	}
	g.roots[boxPath] = true
	return agentPath, boxPath, nil
}

// bindBoxDirs binds the sandbox's rootBinds onto root's directories of the
// same names. It runs on the forking thread, in the sandbox's mount
// namespace, with root given as the box sees it. A name that is missing or
// not a plain directory (a symlink included) is left alone.
func bindBoxDirs(root string) error {
	for _, name := range rootBinds {
		dst := root + "/" + name
		var st unix.Stat_t
		if err := unix.Lstat(dst, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if err := unix.Mount("/"+name, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &fs.PathError{Op: "bind /" + name + " on", Path: dst, Err: err}
		}
	}
	return nil
}
