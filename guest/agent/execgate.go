//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A process with rlimits (protocol.Exec.Rlimits), or whose root has a
// cgroup (cgroup.go), starts as the exec gate:
// the agent binary run again (/proc/self/exe) in the box's sandbox, as
// root, before the chroot and the change of user. It waits on its gate
// pipe while the agent moves it into the cgroup and sets the limits on it (prlimit: the agent has
// CAP_SYS_RESOURCE, which box processes do not, so hard limits can be
// raised as runc does before it drops capabilities), then chroots, changes
// directory and user and executes the program: no instruction of the
// program runs before its limits are set. Go's fork has no hook between
// fork and exec, and rlimits are per process, so the forking thread cannot
// set them on itself.

const execGateArg0 = "boxlite-exec-gate"

// execGateFd is the gate pipe's read end in the gate.
const execGateFd = 3

// execGateOpen is what the agent writes to open the gate; anything else is
// why it did not (at most execGateMsgMax bytes).
const (
	execGateOpen   = "go"
	execGateMsgMax = 512
)

// rlimitTypes are the OCI names of Linux's resource limits.
var rlimitTypes = map[string]int{
	"RLIMIT_CPU": unix.RLIMIT_CPU, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_DATA": unix.RLIMIT_DATA,
	"RLIMIT_STACK": unix.RLIMIT_STACK, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_RSS": unix.RLIMIT_RSS,
	"RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK,
	"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS, "RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE, "RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO,
	"RLIMIT_RTTIME": unix.RLIMIT_RTTIME,
}

// checkLimits validates an Exec's Groups and Rlimits as the request gives them.
func checkLimits(req *protocol.Exec) error {
	if len(req.Groups) > protocol.MaxGroups {
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d groups, limit %d", len(req.Groups), protocol.MaxGroups)
	}
	for _, g := range req.Groups {
		if g == 1<<32-1 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: group %d is not a gid", g)
		}
	}
	if len(req.Rlimits) > protocol.MaxRlimits {
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d rlimits, limit %d", len(req.Rlimits), protocol.MaxRlimits)
	}
	seen := map[string]bool{}
	for _, r := range req.Rlimits {
		if _, ok := rlimitTypes[r.Type]; !ok {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: rlimit type %q unknown", r.Type)
		}
		if seen[r.Type] {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: rlimit %s given twice", r.Type)
		}
		seen[r.Type] = true
		if r.Soft > r.Hard {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: rlimit %s: soft %d above hard %d", r.Type, r.Soft, r.Hard)
		}
	}
	return nil
}

// gateArgv is the gate's argv: what it needs after the limits, then the
// program's path and argv.
func gateArgv(root, dir string, cred *syscall.Credential, argv0 string, argv []string) []string {
	groups := make([]string, 0, len(cred.Groups))
	for _, g := range cred.Groups {
		groups = append(groups, strconv.FormatUint(uint64(g), 10))
	}
	return append([]string{execGateArg0, root, dir,
		strconv.FormatUint(uint64(cred.Uid), 10), strconv.FormatUint(uint64(cred.Gid), 10),
		"g" + strings.Join(groups, ","), argv0}, argv...)
}

// openGate moves the gate process pid into the cgroup directory cgroup
// (when not ""), sets rlimits on it and opens its gate, or tells it why
// not (it then exits 127, saying so on its stderr).
func openGate(gate *os.File, pid int, rlimits []protocol.Rlimit, cgroup string) error {
	defer gate.Close()
	refuse := func(err error) error {
		msg := err.Error()
		_, _ = gate.WriteString(msg[:min(len(msg), execGateMsgMax)])
		return err
	}
	if cgroup != "" {
		if err := writeCgroup(cgroup, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return refuse(fmt.Errorf("join cgroup %s: %w", cgroup, err))
		}
	}
	for _, r := range rlimits {
		lim := unix.Rlimit{Cur: r.Soft, Max: r.Hard}
		if err := unix.Prlimit(pid, rlimitTypes[r.Type], &lim, nil); err != nil {
			return refuse(fmt.Errorf("set %s to %d:%d: %w", r.Type, r.Soft, r.Hard, err))
		}
	}
	_, err := gate.WriteString(execGateOpen)
	return err
}

// isExecGate tells Main that this process is an exec gate.
func isExecGate() bool {
	return len(os.Args) >= 8 && os.Args[0] == execGateArg0 && os.Getpid() != 1
}

// ExecGate runs the exec gate and never returns when this process is
// one (the agent started it for a process with rlimits); it returns at
// once otherwise. The agent binary's main calls it first.
func ExecGate() {
	if !isExecGate() {
		return
	}
	runtime.LockOSThread()
	err := execGate(os.Args[1:])
	fmt.Fprintf(os.Stderr, "boxlite: %s: %v\n", os.Args[7], err)
	os.Exit(127)
}

func execGate(a []string) error {
	root, dir, path, argv := a[0], a[1], a[5], a[6:]
	gate := os.NewFile(execGateFd, "gate")
	buf := make([]byte, execGateMsgMax)
	n, _ := gate.Read(buf)
	gate.Close()
	if string(buf[:n]) != execGateOpen {
		return fmt.Errorf("not started: %s", buf[:n])
	}
	uid, err1 := strconv.ParseUint(a[2], 10, 32)
	gid, err2 := strconv.ParseUint(a[3], 10, 32)
	var groups []int
	if gs := strings.TrimPrefix(a[4], "g"); gs != "" {
		for _, g := range strings.Split(gs, ",") {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return fmt.Errorf("bad group %q", g)
			}
			groups = append(groups, int(n))
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if root != "/" {
		if err := unix.Chroot(root); err != nil {
			return fmt.Errorf("chroot %s: %w", root, err)
		}
	}
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("chdir %s: %w", dir, err)
	}
	// The syscall package's calls change every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return syscall.Exec(path, argv, os.Environ())
}
