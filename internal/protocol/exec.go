package protocol

import (
	"fmt"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// Exec starts a process. Argv is never joined into a shell string. Env replaces
// the process environment entirely (the host merges image and user env).
type Exec struct {
	Argv      []string `msgpack:"argv"`
	Env       []string `msgpack:"env,omitempty"`
	Cwd       string   `msgpack:"cwd,omitempty"`
	User      string   `msgpack:"user,omitempty"`  // name, uid or uid:gid, resolved in the box's /etc/passwd
	Stdin     bool     `msgpack:"stdin,omitempty"` // keep stdin open for TStdin; otherwise /dev/null
	TimeoutMs int64    `msgpack:"timeout_ms,omitempty"`
	GraceMs   int64    `msgpack:"grace_ms,omitempty"` // TERM to KILL after a timeout; default 2000
	// Tty runs the process on a pseudo-terminal (needs FeatureTTY): its
	// stdin, stdout and stderr are the terminal, TStdout carries everything
	// it writes (there are no TStderr frames), TStdin is typed into it and
	// TStdinClose types the terminal's EOF character (^D) instead of closing
	// anything. Rows and Cols are its initial size (default 24x80).
	Tty  bool `msgpack:"tty,omitempty"`
	Rows int  `msgpack:"rows,omitempty"`
	Cols int  `msgpack:"cols,omitempty"`
	// Detach, when set (needs FeatureExecDetach; an older agent would
	// ignore it), names the exec so that it outlives its stream: when the
	// stream is cancelled (TCancel, the host's connection gone) the process
	// keeps running and TAttach with this id resumes it. See detach.go;
	// ValidDetachID says what an id may be.
	Detach string `msgpack:"detach,omitempty"`
	// Lane (needs FeatureExecLane; never with Detach or Tty) lets the
	// agent ask for the lane (TLaneAsk) once the exec's stdout is
	// throughput-bound.
	Lane bool `msgpack:"lane,omitempty"`
	// Root, when set (needs FeatureExecRoot; an older agent would ignore
	// it and run the process in the box's own root), is a directory of the
	// box (an absolute path as the box's processes see it, not "/") that
	// becomes the process's root: a container's root file system shared
	// into the box (the containerd shim's). The agent binds the box's
	// /proc, /dev and /sys onto its proc, dev and sys directories (where
	// they are directories) the first time a root is used, resolves User,
	// Cwd and Argv[0] in it, and chroots the process there.
	Root string `msgpack:"root,omitempty"`
	// RootBinds (with Root) are directories and files of the box bound
	// into the root the first time it is used, after /proc, /dev and /sys
	// (a container's volumes: emptyDirs, configmaps, secrets, its hosts
	// file); a later exec in the same root has them already. At most
	// MaxRootBinds.
	RootBinds []RootBind `msgpack:"root_binds,omitempty"`
	// Groups (needs FeatureExecRlimits), when set, are the process's
	// supplementary groups, instead of those the box's /etc/group gives
	// User (an OCI process's additionalGids). At most MaxGroups.
	Groups []uint32 `msgpack:"groups,omitempty"`
	// Rlimits (needs FeatureExecRlimits; the box sandbox) are set on the
	// process before it runs its program (an OCI process's rlimits): each
	// type at most once, soft <= hard, at most MaxRlimits.
	Rlimits []Rlimit `msgpack:"rlimits,omitempty"`
}

// Rlimit is one resource limit of an Exec.
type Rlimit struct {
	Type string `msgpack:"type"` // as OCI names them: "RLIMIT_NOFILE", ...
	Soft uint64 `msgpack:"soft"`
	Hard uint64 `msgpack:"hard"` // RLIM_INFINITY is 1<<64-1
}

// Bounds of Exec.Groups (the kernel's NGROUPS_MAX) and Exec.Rlimits (one
// per type Linux has).
const (
	MaxGroups  = 65536
	MaxRlimits = 16
)

// RootBind is one bind into an Exec.Root.
type RootBind struct {
	Source   string `msgpack:"source"` // a path of the box (a directory or a file)
	Target   string `msgpack:"target"` // where in the root; made if missing
	ReadOnly bool   `msgpack:"read_only,omitempty"`
}

// ReleaseRoot is TReleaseRoot's body: the Exec.Root to release.
type ReleaseRoot struct {
	Root string `msgpack:"root"`
}

// RootUsageRequest is TRootUsage's body: the Exec.Root to measure.
type RootUsageRequest struct {
	Root string `msgpack:"root"`
}

// RootUsage is what the processes of a process root use. With Cgroup
// set, it is read from the root's cgroup (TRootCgroup): pids.current,
// cpu.stat, memory.current (RSS) and memory.stat. Otherwise it is summed
// over the processes from the box's /proc: CPU time of the live
// processes and of the children they waited for, their resident memory
// (pages shared between them counted once per process).
type RootUsage struct {
	Pids       uint64 `msgpack:"pids"`
	UserUsec   uint64 `msgpack:"user_usec"`
	SystemUsec uint64 `msgpack:"system_usec"`
	RSS        uint64 `msgpack:"rss"`   // bytes
	Anon       uint64 `msgpack:"anon"`  // bytes, of RSS
	File       uint64 `msgpack:"file"`  // bytes, of RSS
	Shmem      uint64 `msgpack:"shmem"` // bytes, of RSS
	// BoxMemory is the box's memory (MemTotal), BoxAvailable what of it
	// is available (MemAvailable), in bytes.
	BoxMemory    uint64 `msgpack:"box_memory"`
	BoxAvailable uint64 `msgpack:"box_available"`
	// From the root's cgroup: Cgroup says the fields above came from it;
	// MemoryMax and PidsMax are its limits (0: none), OOMKills its
	// memory.events oom_kill count, Throttled its cpu.stat throttled_usec.
	Cgroup    bool   `msgpack:"cgroup,omitempty"`
	MemoryMax uint64 `msgpack:"memory_max,omitempty"`
	PidsMax   uint64 `msgpack:"pids_max,omitempty"`
	OOMKills  uint64 `msgpack:"oom_kills,omitempty"`
	Throttled uint64 `msgpack:"throttled_usec,omitempty"`
}

// MaxRootUsageFrame bounds TRootUsage's answer.
const MaxRootUsageFrame = 1024

// MaxRootBinds bounds Exec.RootBinds.
const MaxRootBinds = 64

// MaxTermSize bounds Exec.Rows/Cols and Resize (the kernel keeps them in 16 bits).
const MaxTermSize = 65535

// Resize sets the size of a TTY exec's terminal; the kernel then sends
// SIGWINCH to the terminal's foreground process group.
type Resize struct {
	Rows int `msgpack:"rows"`
	Cols int `msgpack:"cols"`
}

// Started reports the guest pid of an exec.
type Started struct {
	// Pid is the process's pid as the box sees it (with FeatureSandbox, in
	// its own PID namespace); 0 when unknown.
	Pid int `msgpack:"pid"`
	// Tty and Stdin say how the exec was started (its Exec.Tty and
	// Exec.Stdin), for a host that resumes it (TAttach).
	Tty   bool `msgpack:"tty,omitempty"`
	Stdin bool `msgpack:"stdin,omitempty"`
}

// Exit ends an exec stream. Signal is set when the process died of a signal
// (Code is then 128+Signal, as shells report it).
type Exit struct {
	Code     int  `msgpack:"code"`
	Signal   int  `msgpack:"signal,omitempty"`
	TimedOut bool `msgpack:"timed_out,omitempty"`
}

// Error ends a stream whose request failed. Kind is an errdefs.Kind.
type Error struct {
	Kind    string `msgpack:"kind"`
	Message string `msgpack:"message"`
}

// Err rebuilds the error on the receiving side, keeping its kind.
// MaxErrorMessage caps an Error's message as the host reports it: the
// message comes from the guest, and ends up in logs and exceptions.
const MaxErrorMessage = 4 << 10

// Err converts e to a local error of its kind (an unknown kind is internal),
// its message cut at MaxErrorMessage bytes and made valid UTF-8.
func (e Error) Err() error {
	msg := e.Message
	if len(msg) > MaxErrorMessage {
		msg = msg[:MaxErrorMessage] + fmt.Sprintf("... (%d bytes cut)", len(e.Message)-MaxErrorMessage)
	}
	return errdefs.New(errdefs.Kind(e.Kind), strings.ToValidUTF8(msg, "\uFFFD"))
}

// ErrorOf converts a local error for the wire.
func ErrorOf(err error) Error {
	return Error{Kind: string(errdefs.KindOf(err)), Message: err.Error()}
}

// Credit returns window to the sender of Fd's data (0 stdin, 1 stdout, 2 stderr).
type Credit struct {
	Fd    int `msgpack:"fd"`
	Bytes int `msgpack:"bytes"`
}

// Signal delivers a signal number to the exec's process; SIGKILL to its
// whole process group. With Group (needs FeatureSignalGroup; an older agent
// would ignore it and signal the process alone), any signal goes to the
// exec's process group, which the exec leads (with a TTY, to every group of
// its session), as kill(-pid, sig) would: a shell's running command, without
// a shell in the box to send it.
type Signal struct {
	Signal int  `msgpack:"signal"`
	Group  bool `msgpack:"group,omitempty"`
}
