//go:build linux

package agent

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

const maxSymlinks = 40

// resolveIn resolves the box path p (absolute, or relative to "/") inside
// root the way the kernel would after chroot(root): symlinks, absolute or
// relative, and ".." never leave root. It returns the host path of the final
// file, which must exist.
func resolveIn(root, p string) (string, error) {
	cur := "/"
	todo := p
	links := 0
	for todo != "" {
		var c string
		c, todo, _ = strings.Cut(todo, "/")
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		host := filepath.Join(root, next)
		fi, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if todo != "" && !fi.IsDir() {
				return "", &fs.PathError{Op: "lstat", Path: host, Err: unix.ENOTDIR}
			}
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "readlink", Path: host, Err: unix.ELOOP}
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		if todo == "" {
			todo = target
		} else {
			todo = target + "/" + todo
		}
	}
	return filepath.Join(root, cur), nil
}

// defaultPath is used when the exec's environment has no PATH (as a shell would).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func envLookup(env []string, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if k, val, found := strings.Cut(kv, "="); found && k == key {
			v, ok = val, true // the last one wins, as in the process's own getenv loops
		}
	}
	return v, ok
}

// lookPath finds the executable for name inside root, searching the exec's
// PATH (not the agent's, which os/exec.LookPath would use) and resolving
// relative names against cwd. It returns the path to pass to execve after
// chroot (or in the sandbox), which is a box path.
func lookPath(root, cwd, name string, env []string) (string, error) {
	check := newExecCheck(root)
	defer check.close()
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			p = path.Join(cwd, p)
		}
		if err := check.executable(p); err != nil {
			return "", fileErr(name, err)
		}
		return name, nil
	}
	pathEnv, ok := envLookup(env, "PATH")
	if !ok {
		pathEnv = defaultPath
	}
	var denied error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !path.IsAbs(dir) {
			dir = path.Join(cwd, dir)
		}
		cand := path.Join(dir, name)
		err := check.executable(cand)
		if err == nil {
			return cand, nil
		}
		if denied == nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			denied = err
		}
	}
	if denied != nil {
		return "", fileErr(name, denied)
	}
	return "", errdefs.Errorf(errdefs.ErrNotFound, "exec %q: executable file not found in $PATH", name)
}

var errNotExecutable = errors.New("permission denied (not executable)")

// execCheck looks for executables inside root. With openat2's
// RESOLVE_IN_ROOT one call resolves a box path as the kernel would after
// chroot(root), which resolveIn does with a call per component and link
// (a lookup through PATH was some twenty calls, each dear under
// emulation); without it (a kernel before 5.6), resolveIn.
type execCheck struct {
	root string
	fd   int // root opened O_PATH; -1: resolveIn
}

func newExecCheck(root string) execCheck {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	return execCheck{root: root, fd: fd}
}

func (c *execCheck) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// executable checks that the box path p is an executable file (not a
// directory, some execute bit set).
func (c *execCheck) executable(p string) error {
	var st unix.Stat_t
	if err := c.stat(p, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.EISDIR
	}
	if st.Mode&0o111 == 0 {
		return errNotExecutable
	}
	return nil
}

// stat stats the file the box path p resolves to, inside root.
func (c *execCheck) stat(p string, st *unix.Stat_t) error {
	if c.fd >= 0 {
		fd, err := unix.Openat2(c.fd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		if err == nil {
			err = unix.Fstat(fd, st)
			unix.Close(fd)
			return err
		}
		if err != unix.ENOSYS && err != unix.EINVAL && err != unix.E2BIG {
			return err
		}
		c.close() // no openat2 here: resolve by hand from now on
	}
	host, err := resolveIn(c.root, p)
	if err != nil {
		return err
	}
	return unix.Stat(host, st)
}

// fileErr turns a file-system error about the executable name into an error of
// the right kind for the wire.
func fileErr(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		return errdefs.Errorf(errdefs.ErrNotFound, "exec %q: no such file or directory", name)
	case errors.Is(err, unix.EISDIR):
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec %q: is a directory", name)
	case errors.Is(err, errNotExecutable), errors.Is(err, fs.ErrPermission):
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec %q: permission denied", name)
	case errors.Is(err, unix.ELOOP):
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec %q: too many levels of symbolic links", name)
	}
	return errdefs.Errorf(errdefs.ErrInternal, "exec %q: %v", name, err)
}
