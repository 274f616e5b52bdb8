//go:build linux

package agent

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
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
func (g *sandboxGen) containerRoot(root string, binds []protocol.RootBind) (agentPath, boxPath string, err error) {
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
	boxPath = g.boxPath(agentPath)
	if boxPath == "/" {
		return "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root %q is the box's own root", root)
	}
	g.rootsMu.Lock()
	defer g.rootsMu.Unlock()
	if g.roots[boxPath] {
		return agentPath, boxPath, nil
	}
	if err := inMountNSOf(g.initPid, func() error { return bindBoxDirs(boxPath) }); err != nil {
		return "", "", errdefs.Errorf(errdefs.ErrInternal, "exec: root %q: %v", root, err)
	}
	rbs, err := g.resolveRootBinds(agentPath, binds)
	if err != nil {
		return "", "", err
	}
	if err := inMountNSOf(g.initPid, func() error { return bindInto(rbs) }); err != nil {
		return "", "", errdefs.Errorf(errdefs.ErrInternal, "exec: root %q: %v", root, err)
	}
	if g.roots == nil {
		g.roots = map[string]bool{}
	}
	g.roots[boxPath] = true
	return agentPath, boxPath, nil
}

// bindBoxDirs binds the sandbox's rootBinds onto root's directories of the
// same names. It runs in the sandbox's mount namespace (inMountNSOf; not
// on the forking thread, whose seccomp filter refuses mounts), with root
// given as the box sees it. A name that is missing or
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

// checkRootBinds validates an Exec's RootBinds as the request gives them.
func checkRootBinds(req *protocol.Exec) error {
	if len(req.RootBinds) == 0 {
		return nil
	}
	if req.Root == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root binds without a root")
	}
	if len(req.RootBinds) > protocol.MaxRootBinds {
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d root binds, limit %d", len(req.RootBinds), protocol.MaxRootBinds)
	}
	for i, b := range req.RootBinds {
		for _, p := range []string{b.Source, b.Target} {
			if len(p) > maxCwdLen || strings.ContainsRune(p, 0) || !path.IsAbs(p) || path.Clean(p) == "/" {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root bind %d: bad path %q", i, p)
			}
		}
	}
	return nil
}

// makeIn returns the agent's path to p inside root (an agent path),
// resolving symlinks inside root as resolveIn does and making what is
// missing: directories, and the last component as an empty file when file
// is set.
func makeIn(root, p string, file bool) (string, error) {
	comps := strings.Split(path.Clean("/"+p), "/")[1:]
	cur, host := "/", root
	for i, c := range comps {
		next := path.Join(cur, c)
		h, err := resolveIn(root, next)
		if errors.Is(err, fs.ErrNotExist) {
			parent, perr := resolveIn(root, cur)
			if perr != nil {
				return "", perr
			}
			h = parent + "/" + c
			if _, lerr := os.Lstat(h); lerr == nil {
				return "", &fs.PathError{Op: "resolve", Path: next, Err: unix.ENOENT} // a dangling symlink
			}
			if i == len(comps)-1 && file {
				fd, ferr := unix.Open(h, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_WRONLY, 0o644)
				if ferr != nil {
					return "", &fs.PathError{Op: "create", Path: h, Err: ferr}
				}
				unix.Close(fd)
			} else if err := os.Mkdir(h, 0o755); err != nil {
				return "", err
			}
		} else if err != nil {
			return "", err
		}
		host = h
		cur = "/" + strings.TrimPrefix(strings.TrimPrefix(h, root), "/")
	}
	return host, nil
}

// rootBind is a RootBind resolved to the sandbox's paths.
type rootBind struct {
	src, dst string
	readOnly bool
}

// resolveRootBinds resolves binds for the root at rootAgent (the agent's
// path to it): each source in the box, each target in the root (made if
// missing, a file for a file), both as the sandbox sees them.
func (g *sandboxGen) resolveRootBinds(rootAgent string, binds []protocol.RootBind) ([]rootBind, error) {
	out := make([]rootBind, 0, len(binds))
	for i, b := range binds {
		src, err := resolveIn(g.root(), b.Source)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrNotFound, "exec: root bind %d: source %q: %v", i, b.Source, err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrNotFound, "exec: root bind %d: source %q: %v", i, b.Source, err)
		}
		dst, err := makeIn(rootAgent, b.Target, !fi.IsDir())
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: root bind %d: target %q: %v", i, b.Target, err)
		}
		out = append(out, rootBind{src: g.boxPath(src), dst: g.boxPath(dst), readOnly: b.ReadOnly})
	}
	return out, nil
}

// boxPath is the sandbox's path for an agent path under g.root().
func (g *sandboxGen) boxPath(agentPath string) string {
	return "/" + strings.TrimPrefix(strings.TrimPrefix(agentPath, g.root()), "/")
}

// bindInto makes binds (in the sandbox's mount namespace: inMountNSOf).
func bindInto(binds []rootBind) error {
	for _, b := range binds {
		if err := unix.Mount(b.src, b.dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &fs.PathError{Op: "bind " + b.src + " on", Path: b.dst, Err: err}
		}
		if b.readOnly {
			if err := unix.Mount("", b.dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
				return &fs.PathError{Op: "remount read-only", Path: b.dst, Err: err}
			}
		}
	}
	return nil
}

// releaseRoot serves TReleaseRoot: it undoes the mounts the agent made in
// a process root, on a goroutine of its own (an unmount may wait on the
// file daemon), and answers an empty TCopyDone or TError.
func (s *server) releaseRoot(f protocol.Frame) {
	id, root, ok := s.rootRequest(f, "release-root")
	if !ok {
		return
	}
	go func() {
		if err := s.cfg.Sandbox.releaseRoot(root); err != nil {
			s.sendError(id, err)
			return
		}
		if f, err := protocol.Encode(protocol.TCopyDone, id, protocol.CopyDone{}); err == nil {
			_ = s.write(f)
		}
	}()
}

// rootRequest decodes and checks a request about a process root
// (TReleaseRoot, TRootUsage: their bodies are both {root}); when it is
// bad, it answers the error and ok is false.
func (s *server) rootRequest(f protocol.Frame, what string) (id uint32, root string, ok bool) {
	id = f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s on stream 0: it needs a stream id of its own", what))
		return 0, "", false
	}
	var req protocol.ReleaseRoot
	err := protocol.Decode(f, &req)
	if err == nil {
		err = checkRoot(req.Root)
	}
	if err == nil && s.cfg.Sandbox == nil {
		err = errdefs.Errorf(errdefs.ErrUnsupported, "%s: the box has no sandbox, so no process roots", what)
	}
	if err != nil {
		s.sendError(id, err)
		return 0, "", false
	}
	return id, req.Root, true
}

// releaseRoot unmounts what the live sandbox has mounted at and below the
// process root root and forgets it (a later exec readies it anew). A
// sandbox that is down has nothing mounted.
func (sb *Sandbox) releaseRoot(root string) error {
	sb.mu.Lock()
	g := sb.gen
	sb.mu.Unlock()
	boxPath := path.Clean(root)
	if g != nil && !g.down() {
		if agentPath, err := resolveIn(g.root(), root); err == nil {
			boxPath = g.boxPath(agentPath)
		}
	}
	// Its cgroup goes first: what still runs there is killed.
	if err := cgroups.remove(boxPath); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "release-root %q: %v", root, err)
	}
	if g == nil || g.down() {
		return nil
	}
	g.rootsMu.Lock()
	defer g.rootsMu.Unlock()
	if err := inMountNSOf(g.initPid, func() error { return unmountUnder(boxPath) }); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "release-root %q: %v", root, err)
	}
	delete(g.roots, boxPath)
	return nil
}

// unmountUnder detaches every mount at or below dir in the sandbox's mount
// namespace, which the calling thread has joined, deepest first. The table
// is the sandbox init's: in the sandbox's /proc, which the thread now sees,
// it is pid 1 (the thread itself has no pid there).
func unmountUnder(dir string) error {
	mps, err := mountPoints("/proc/1/mountinfo")
	if err != nil {
		return err
	}
	var under []string
	for _, mp := range mps {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			under = append(under, mp)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	for _, mp := range under {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "unmount", Path: mp, Err: err}
		}
	}
	return nil
}
