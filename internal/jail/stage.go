package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// stageExit is the helper's exit status when the stage fails.
const stageExit = 125

// Main runs the jail stage when the process was started by Cmd.Start, and
// never returns then: it confines the process and executes the program, or
// reports the failing step to the parent and exits. Otherwise it returns at
// once. Call it first thing in the helper's main; the helper's package
// initializers run before it in every jailed start, so they must have no
// side effects (files, sockets, goroutines that write).
func Main() {
	if len(os.Args) != 3 || os.Args[1] != stageArg {
		return
	}
	// Namespaces, no_new_privs, seccomp and the parent-death signal are
	// per thread: everything up to execve happens on this one.
	runtime.LockOSThread()
	fd, err := strconv.Atoi(os.Args[2])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "jail: bad stage argument %q\n", os.Args[2])
		os.Exit(stageExit)
	}
	status := os.NewFile(uintptr(fd+1), "jail-status")
	err = stage(os.NewFile(uintptr(fd), "jail-spec"), status)
	var se *StageError
	if !errors.As(err, &se) {
		se = &StageError{Step: "stage", Err: err}
	}
	m := wireStatus{Step: se.Step, Msg: se.Err.Error()}
	var no syscall.Errno
	if errors.As(se.Err, &no) {
		m.Errno = int(no)
	}
	b, _ := json.Marshal(m)
	status.Write(append(b, '\n'))
	os.Exit(stageExit)
}

func fail(step string, err error) error { return &StageError{Step: step, Err: err} }

// stage confines the process and executes the program; it returns only on
// failure.
func stage(specFile, status *os.File) error {
	b, err := io.ReadAll(io.LimitReader(specFile, 4<<20))
	specFile.Close()
	if err != nil {
		return fail("read spec", err)
	}
	var s wireSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return fail("read spec", err)
	}
	if s.Path == "" {
		// The parent died before sending the spec.
		return fail("read spec", errors.New("empty spec"))
	}
	var l Layers

	// Every descriptor past the program's is closed by execve, the status
	// pipe included, which tells the parent that execve succeeded.
	if err := closeOnExecFrom(3 + s.NExtra); err != nil {
		return fail("close descriptors", err)
	}

	if s.MountNS {
		if err := buildRoot(&s, &l); err != nil {
			return err
		}
	} else {
		l.PivotRoot.Note = "no mount namespace"
	}

	for _, r := range s.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fail(fmt.Sprintf("setrlimit %d", r.Resource), err)
		}
	}
	if len(s.Rlimits) > 0 {
		l.Rlimits = Layer{Applied: true, Note: rlimitNote(s.Rlimits)}
	} else {
		l.Rlimits.Note = "Spec.Rlimits is empty"
	}

	if s.SetID {
		bset, err := dropToUID(&s)
		if err != nil {
			return err
		}
		l.UID = Layer{Applied: true, Note: fmt.Sprintf("uid %d gid %d, no supplementary groups, no capabilities", s.UID, s.GID)}
		if bset {
			l.UID.Note += ", empty bounding set"
		}
	} else {
		// In a user namespace the stage holds CAP_SYS_ADMIN as an ambient
		// capability; without it the program would inherit it.
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && s.UserNS {
			return fail("clear ambient capabilities", err)
		}
		l.UID.Note = fmt.Sprintf("caller is not root: runs as its uid %d", os.Getuid())
		if os.Getuid() == 0 {
			l.UID.Note = "keeps root (Spec.KeepRoot): acts on host files as its caller"
		}
	}

	// A credential change clears the parent-death signal: re-arm it, then
	// make sure the parent did not die before that. In a PID namespace of
	// its own the stage's parent is outside and getppid says 0 whether it
	// lives or not: there the status line below is the check (the parent
	// holds the pipe's only read end, closed when it exits, before its
	// children are told: a write after a missed signal fails with EPIPE).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fail("prctl PR_SET_PDEATHSIG", err)
	}
	if ppid := os.Getppid(); ppid != s.PPid && !(s.PIDNS && ppid == 0) {
		return fail("parent check", fmt.Errorf("parent %d exited (parent is now %d)", s.PPid, ppid))
	}

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("prctl PR_SET_NO_NEW_PRIVS", err)
	}
	l.NoNewPrivs = Layer{Applied: true, Note: "set"}

	if s.Seccomp {
		note, err := installSeccomp(s.DenySetID)
		switch {
		case errors.Is(err, seccomp.ErrUnavailable):
			var errno unix.Errno
			errors.As(err, &errno)
			l.Seccomp.Note = fmt.Sprintf("the kernel has no seccomp filters (%v)", errno)
		case err != nil:
			return fail("seccomp", err)
		case note == "":
			l.Seccomp.Note = "no filter for " + runtime.GOARCH
		default:
			l.Seccomp = Layer{Applied: true, Note: note}
		}
	}

	msg, _ := json.Marshal(wireStatus{Layers: &l})
	if _, err := status.Write(append(msg, '\n')); err != nil {
		return fail("status", err)
	}
	env := s.Env
	if env == nil {
		env = []string{}
	}
	err = syscall.Exec(s.Path, s.Args, env)
	return fail("execve "+s.Path, err)
}

// closeOnExecFrom marks every descriptor >= fd close-on-exec.
func closeOnExecFrom(fd int) error {
	err := unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: walk /proc/self/fd (still the host's /proc here).
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; /proc/self/fd: %v", err, rerr)
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			unix.CloseOnExec(n)
		}
	}
	return nil
}

// dropToUID empties the capability bounding set (bset reports whether it
// could) and the supplementary groups, then sets gid and uid (all threads;
// the uid change clears the capabilities).
func dropToUID(s *wireSpec) (bset bool, err error) {
	bset = true
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == unix.EINVAL { // past the last capability
			break
		}
		if err == unix.EPERM { // no CAP_SETPCAP: the uid change still clears the others
			bset = false
			break
		}
		if err != nil {
			return false, fail(fmt.Sprintf("drop capability %d from the bounding set", c), err)
		}
	}
	if err := syscall.Setgroups(nil); err != nil {
		return false, fail("setgroups", err)
	}
	if err := syscall.Setresgid(int(s.GID), int(s.GID), int(s.GID)); err != nil {
		return false, fail(fmt.Sprintf("setgid %d", s.GID), err)
	}
	if err := syscall.Setresuid(int(s.UID), int(s.UID), int(s.UID)); err != nil {
		return false, fail(fmt.Sprintf("setuid %d", s.UID), err)
	}
	if os.Getuid() != int(s.UID) || os.Geteuid() != int(s.UID) || os.Getgid() != int(s.GID) {
		return false, fail("setuid", fmt.Errorf("still uid %d/%d gid %d", os.Getuid(), os.Geteuid(), os.Getgid()))
	}
	return bset, nil
}

func rlimitNote(rs []Rlimit) string {
	names := map[int]string{unix.RLIMIT_CORE: "CORE", unix.RLIMIT_NOFILE: "NOFILE", unix.RLIMIT_NPROC: "NPROC",
		unix.RLIMIT_FSIZE: "FSIZE", unix.RLIMIT_AS: "AS", unix.RLIMIT_MEMLOCK: "MEMLOCK", unix.RLIMIT_STACK: "STACK"}
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		n := names[r.Resource]
		if n == "" {
			n = strconv.Itoa(r.Resource)
		}
		s += fmt.Sprintf("%s=%d/%d", n, r.Cur, r.Max)
	}
	return s
}
