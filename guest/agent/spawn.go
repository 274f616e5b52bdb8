//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Caps on what one exec request may claim (the frame cap bounds the total).
const (
	maxArgs       = 16384
	maxEnv        = 16384
	maxStringLen  = 128 << 10 // the kernel's MAX_ARG_STRLEN
	maxUserLen    = 256
	maxCwdLen     = 4096
	defaultGrace  = protocol.DefaultGrace
	maxDurationMs = int64(100 * 365 * 24 * time.Hour / time.Millisecond)
)

func validateExec(req *protocol.Exec) error {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: "+format, args...)
	}
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return bad("empty argv")
	case len(req.Argv) > maxArgs:
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d arguments, limit %d", len(req.Argv), maxArgs)
	case len(req.Env) > maxEnv:
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d environment entries, limit %d", len(req.Env), maxEnv)
	case len(req.User) > maxUserLen || strings.ContainsRune(req.User, 0):
		return bad("bad user %q", req.User)
	case len(req.Cwd) > maxCwdLen || strings.ContainsRune(req.Cwd, 0):
		return bad("bad cwd %q", req.Cwd)
	case req.TimeoutMs < 0:
		return bad("negative timeout_ms %d", req.TimeoutMs)
	case req.GraceMs < 0:
		return bad("negative grace_ms %d", req.GraceMs)
	}
	if req.Root != "" {
		if err := checkRoot(req.Root); err != nil {
			return err
		}
	}
	if err := checkRootBinds(req); err != nil {
		return err
	}
	if err := checkLimits(req); err != nil {
		return err
	}
	if req.Tty {
		if _, _, err := termSize(req.Rows, req.Cols); err != nil {
			return fmt.Errorf("exec: %w", err)
		}
	}
	for i, a := range req.Argv {
		if len(a) > maxStringLen {
			return errdefs.Errorf(errdefs.ErrLimit, "exec: argv[%d] is %d bytes, limit %d", i, len(a), maxStringLen)
		}
		if strings.ContainsRune(a, 0) {
			return bad("argv[%d] contains a NUL byte", i)
		}
	}
	for i, kv := range req.Env {
		if len(kv) > maxStringLen {
			return errdefs.Errorf(errdefs.ErrLimit, "exec: env[%d] is %d bytes, limit %d", i, len(kv), maxStringLen)
		}
		if strings.ContainsRune(kv, 0) {
			return bad("env[%d] contains a NUL byte", i)
		}
	}
	return nil
}

func millis(ms int64) time.Duration {
	return time.Duration(min(ms, maxDurationMs)) * time.Millisecond
}

// spawn validates and resolves req inside the box root and starts its process.
// The returned execution is started but not yet running (see run).
func (s *server) spawn(id uint32, req protocol.Exec) (*execution, error) {
	if s.cfg.RootErr != nil {
		return nil, s.cfg.RootErr
	}
	if err := validateExec(&req); err != nil {
		return nil, err
	}
	// Users and executables are looked up in the box root as the agent
	// mounted it (the image's files); the cwd, which may be under the
	// sandbox's own mounts (/dev/shm, /proc), as the box's processes see it.
	// The sandbox's view goes through /proc/<init>/root, which costs a
	// magic-link walk and a ptrace check per lookup.
	root, cwdRoot := s.cfg.Root, s.cfg.Root
	var gen *sandboxGen
	if sb := s.cfg.Sandbox; sb != nil {
		var err error
		if gen, err = sb.current(); err != nil {
			return nil, err
		}
		cwdRoot = gen.root()
	}
	chroot, cgroup := "", ""
	if req.Root != "" {
		if gen == nil {
			return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: a root of its own needs the box sandbox")
		}
		var err error
		if root, chroot, err = gen.containerRoot(req.Root, req.RootBinds); err != nil {
			return nil, err
		}
		cwdRoot = root
		cgroup = cgroups.of(chroot)
	}
	cwd := path.Clean("/" + req.Cwd)
	hostCwd, err := cwdRoot, error(nil)
	if gen == nil || cwd != "/" { // the sandbox's / is a directory
		if hostCwd, err = resolveIn(cwdRoot, cwd); err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(hostCwd); err == nil && !fi.IsDir() {
				err = unix.ENOTDIR
			}
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return nil, errdefs.Errorf(errdefs.ErrNotFound, "exec: cwd %q: no such directory", cwd)
		}
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: cwd %q: %v", cwd, err)
	}

	env := req.Env
	var cred *syscall.Credential
	if gen != nil || req.User != "" {
		who, err := resolveUser(root, req.User)
		if err != nil {
			return nil, err
		}
		cred = &syscall.Credential{Uid: who.Uid, Gid: who.Gid, Groups: who.Groups}
		if len(req.Groups) > 0 {
			cred.Groups = req.Groups
		}
		if _, ok := envLookup(env, "HOME"); !ok {
			env = append(env[:len(env):len(env)], "HOME="+who.Home)
		}
	}
	if req.Tty {
		if _, ok := envLookup(env, "TERM"); !ok {
			env = append(env[:len(env):len(env)], "TERM="+defaultTerm)
		}
	}
	argv0, err := lookPath(root, cwd, req.Argv[0], env)
	if err != nil {
		return nil, err
	}

	sys := &syscall.SysProcAttr{Setpgid: true, Credential: cred, Chroot: chroot}
	dir := cwd
	if gen == nil && root != "/" {
		// Development mode with a box root but no sandbox: run the files
		// the box paths resolve to.
		dir = hostCwd
		p := argv0
		if !path.IsAbs(p) {
			p = path.Join(cwd, p)
		}
		if argv0, err = resolveIn(root, p); err != nil {
			return nil, fileErr(req.Argv[0], err)
		}
	}

	var gate *os.File
	gateR := -1
	// The gate also puts the process in its root's cgroup (execgate.go).
	if len(req.Rlimits) > 0 || cgroup != "" {
		if gen == nil || cred == nil {
			return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: rlimits need the box sandbox")
		}
		if gate, gateR, err = pipe(true, 0); err != nil {
			return nil, errdefs.Errorf(errdefs.ErrLimit, "exec: pipe: %v", err)
		}
		defer unix.Close(gateR) // the child has its own copy
		defer gate.Close()      // openGate's, unless the spawn fails first
	}
	e := newExecution(s, id, req)
	var files []uintptr
	if req.Tty {
		pts := "/dev/pts"
		if gen != nil {
			pts = gen.root() + "/dev/pts"
		}
		f, err := s.startTTY(e, req, pts, sys, cred)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own copies
		files = []uintptr{f.Fd(), f.Fd(), f.Fd()}
	} else {
		child, err := s.startPipes(e, req)
		if err != nil {
			return nil, err
		}
		defer closeFds(child[:]) // the child has its own copies
		stdin := s.devNull.Fd()
		if child[0] >= 0 {
			stdin = uintptr(child[0])
		}
		files = []uintptr{stdin, uintptr(child[1]), uintptr(child[2])}
	}
	argv := req.Argv
	if gate != nil {
		// Through the exec gate (execgate.go): the chroot, directory and
		// user are its to set, after the limits.
		gateRoot := chroot
		if gateRoot == "" {
			gateRoot = "/"
		}
		argv = gateArgv(gateRoot, dir, cred, argv0, req.Argv)
		argv0, dir, files = "/proc/self/exe", "/", append(files, uintptr(gateR))
		sys.Chroot, sys.Credential = "", nil
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: sys}
	pid, err := s.reaper.spawn(func() (int, error) {
		if gen == nil {
			return syscall.ForkExec(argv0, argv, attr)
		}
		// In the sandbox; the host is told the pid the box knows it by,
		// which the child's pidfd tells (-1 from a kernel without them).
		pidfd := -1
		sys.PidFD = &pidfd
		pid, err := gen.forkExec(argv0, argv, attr)
		if err == nil {
			if e.boxPid, err = nsPid(pid, pidfd); err != nil {
				s.cfg.Logf("exec %d: %v", id, err)
				e.boxPid, err = 0, nil
			}
			if pidfd >= 0 {
				unix.Close(pidfd)
			}
		}
		return pid, err
	}, e.onExit)
	if err != nil {
		e.closeOutputs()
		e.closeInput()
		return nil, spawnErr(req.Argv[0], err)
	}
	if gate != nil {
		if err := openGate(gate, pid, req.Rlimits, cgroup); err != nil {
			// The gate exits 127 and says why on the process's stderr.
			s.cfg.Logf("exec %d: %v", id, err)
		}
	}
	e.pid = pid
	if gen == nil {
		e.boxPid = pid
	}
	return e, nil
}

// startPipes makes e's stdout and stderr pipes, and its stdin pipe when the
// exec asked for one, and returns the child's ends: stdin (-1 without one:
// the child reads /dev/null), stdout, stderr.
func (s *server) startPipes(e *execution, req protocol.Exec) ([3]int, error) {
	child := [3]int{-1, -1, -1}
	fail := func(err error) ([3]int, error) {
		closeFds(child[:])
		e.closeOutputs()
		e.closeInput()
		return [3]int{-1, -1, -1}, errdefs.Errorf(errdefs.ErrLimit, "exec: pipe: %v", err)
	}
	var err error
	if e.stdout, child[1], err = pipe(false, outPipeSize); err != nil {
		return fail(err)
	}
	if e.stderr, child[2], err = pipe(false, outPipeSize); err != nil {
		return fail(err)
	}
	if req.Stdin {
		if e.stdin, child[0], err = pipe(true, 0); err != nil {
			return fail(err)
		}
	}
	return child, nil
}

// pipe makes a pipe whose agent end is a pollable *os.File (the write end
// when agentWrites, else the read end) and whose child end is a plain
// blocking fd, as a child expects its stdio to be. size, if not 0, asks for
// that capacity (best effort: the kernel caps it at pipe-max-size). Raw
// calls: os.Pipe registers both ends with the poller, and Fd() takes the
// child's end out again, four system calls more per pipe.
func pipe(agentWrites bool, size int) (agent *os.File, child int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, -1, err
	}
	mine, theirs := p[0], p[1]
	if agentWrites {
		mine, theirs = p[1], p[0]
	}
	if _, err := unix.FcntlInt(uintptr(theirs), unix.F_SETFL, 0); err != nil {
		closeFds(p[:])
		return nil, -1, err
	}
	if size > 0 {
		_, _ = unix.FcntlInt(uintptr(mine), unix.F_SETPIPE_SZ, size)
	}
	return os.NewFile(uintptr(mine), "pipe"), theirs, nil
}

func closeFds(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// startTTY gives e a pseudo-terminal and returns its slave, which becomes
// the child's stdin, stdout, stderr and controlling terminal in a session
// of its own (so its process group is still its pid).
func (s *server) startTTY(e *execution, req protocol.Exec, pts string, sys *syscall.SysProcAttr, cred *syscall.Credential) (*os.File, error) {
	rows, cols, err := termSize(req.Rows, req.Cols)
	if err != nil {
		return nil, err
	}
	p, err := openPTY(pts, rows, cols)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		// As login(1) does: the user owns the terminal it is given.
		_ = unix.Fchown(int(p.slave.Fd()), int(cred.Uid), -1)
	}
	e.stdout, e.tty = p.master, p.input
	if req.Stdin {
		e.stdin = p.input
	}
	sys.Setpgid = false // setsid makes the group; setpgid would then fail
	sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	return p.slave, nil
}

func spawnErr(name string, err error) error {
	var kind error
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return errdefs.Errorf(errdefs.ErrNotFound, "exec %q: %v (or its interpreter is missing)", name, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOEXEC),
		errors.Is(err, unix.EISDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EINVAL):
		kind = errdefs.ErrInvalidArgument
	case errors.Is(err, unix.E2BIG), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOMEM),
		errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		kind = errdefs.ErrLimit
	default:
		kind = errdefs.ErrInternal
	}
	return errdefs.Errorf(kind, "exec %q: %v", name, err)
}
