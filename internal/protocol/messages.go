package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/safetext"
)

// Version is the protocol version carried in Hello. New fields are optional
// (omitempty), so a peer ignores what it does not know; a new message type is
// answered with an Error of kind "unsupported".
const Version = 1

// InitialWindow is the flow-control window per direction and stream: a sender
// may have this many data bytes unacknowledged before it waits for Credit.
const InitialWindow = 256 << 10

// DefaultGrace is how long the agent waits between TERM and KILL when an
// exec's timeout fires and the request names no grace period.
const DefaultGrace = 2 * time.Second

// Type names a frame's body.
type Type uint8

const (
	// Guest to host.
	THello   Type = 1 // Hello, stream 0, once after boot
	TStarted Type = 2 // Started: the exec's process is running
	TStdout  Type = 3 // raw bytes
	TStderr  Type = 4 // raw bytes
	TExit    Type = 5 // Exit: last frame of an exec stream
	TError   Type = 6 // Error: the request on this stream failed; last frame of the stream

	// Both ways.
	TCredit Type = 7 // Credit: the receiver consumed bytes; the sender may send that many more

	// Guest to host.
	TCopyDone Type = 8 // CopyDone: the copy on this stream succeeded; last frame of a copy stream
	TParked   Type = 9 // Started: the process of a TPark is up and idle; last frame of its stream
	// TEOF (tunnel streams only, no body): the box's side of the
	// connection sent its last byte (the server half-closed or closed it);
	// the stream stays open for the host's data until TExit or TError.
	TEOF Type = 10

	// Host to guest.
	TExec       Type = 16 // Exec: start a process on a new stream
	TStdin      Type = 17 // raw bytes
	TStdinClose Type = 18 // no body
	TSignal     Type = 19 // Signal
	TCancel     Type = 20 // no body: the host is gone; kill the process group, drop its output
	TShutdown   Type = 21 // stream 0, no body: sync disks and power off
	TResize     Type = 22 // Resize: set the terminal size of a TTY exec (SIGWINCH follows)
	// TCopyIn starts a copy into the box on a new stream (needs FeatureCopy):
	// the host sends a tar stream as TStdin frames (or, with CopyIn.Lane,
	// through the lane as TLane chunks), then TStdinClose; the agent
	// credits fd 0 (frees the chunks' slots) and ends with TCopyDone or
	// TError.
	TCopyIn Type = 23
	// TCopyOut starts a copy out of the box on a new stream (needs
	// FeatureCopy): the agent sends a tar stream as TStdout frames within
	// the window (the host credits fd 1), or with CopyOut.Lane as TLane
	// chunks within its slots (the host frees them), then TCopyDone or
	// TError.
	TCopyOut Type = 24
	// TIdentity, stream 0 (needs FeatureIdentity): Identity, what makes the
	// box its own machine; the agent answers with an empty TIdentity on
	// stream 0, or TError.
	TIdentity Type = 25
	// TLane, both ways on a copy stream that asked for the lane (CopyIn.Lane,
	// CopyOut.Lane): LaneChunk, the stream's next data is in the lane. The
	// sender's chunks take the lane's slots in order, one each, from slot 0
	// round the ring.
	TLane Type = 26
	// TLaneFree, both ways: LaneFree, the receiver is done with the oldest
	// chunks it was sent; their slots are the sender's again.
	TLaneFree Type = 27
	// TPark (needs FeaturePark): Exec, a process to start now and hold,
	// its pipes unread, until a TExec asks for exactly the same request;
	// that exec then gets this process instead of a new one (its output so
	// far included). The agent answers TParked once the process sits idle,
	// or TError. How a template carries a started session interpreter.
	TPark Type = 28
	// TAttach (needs FeatureExecDetach): Attach, resume a detachable exec
	// (Exec.Detach) on a new stream. The agent answers as for TExec:
	// Started, then the output the exec's last host had not acknowledged,
	// live output, and Exit; or TError (no such exec: ErrNotFound; another
	// stream holds it: ErrAlreadyExists). See detach.go.
	TAttach Type = 29
	// TClock, stream 0 (needs FeatureClock): Clock, the host's wall clock,
	// which the guest steps its own to (a VM resumed from a pause kept the
	// time it was paused at); the agent answers with an empty TClock on
	// stream 0, or TError.
	TClock Type = 30
	// TTunnel (needs FeatureTunnel): Tunnel, open a TCP connection to a
	// port on the box's loopback on a new stream, and carry its bytes: the
	// agent answers TStarted once connected (or TError: nothing listens,
	// ErrUnreachable), then sends what the box's side writes as TStdout
	// within the window the host credits (fd 1), TEOF when it has sent its
	// last byte, and credits the host's TStdin (fd 0). TStdinClose
	// half-closes the connection (shutdown SHUT_WR); TCancel resets it.
	// The stream ends with TExit (code 0) once both directions are done,
	// or TError when the connection failed. No network in the box is
	// needed: the bytes cross the agent's channel.
	TTunnel Type = 31
	// TWatch (needs FeatureWatch): Watch, watch a box directory with
	// inotify on a new stream. The agent sends the events as TStdout
	// frames within the window (the host credits fd 1), each event a
	// WatchRecord, until the host cancels (TCancel) or the watch ends:
	// TCopyDone when the directory itself went, TError when the watch
	// failed.
	TWatch Type = 37
	// TReleaseRoot (needs FeatureExecRoot): ReleaseRoot, undo what the
	// agent mounted into a process root (Exec.Root: the box's /proc, /dev,
	// /sys, the RootBinds) and forget it; its processes should have ended.
	// The agent answers TCopyDone (an empty one) or TError, on the stream.
	TReleaseRoot Type = 38
	// TRootUsage (needs FeatureRootUsage): RootUsageRequest, what the
	// processes whose root is that process root (Exec.Root: a container's)
	// use now. The agent answers one TStdout frame, a RootUsage in
	// msgpack (at most MaxRootUsageFrame bytes), then TCopyDone (an
	// empty one), or TError, on the stream.
	TRootUsage Type = 39

	// Host to shim, answered by the shim on the same stream.
	TInfo Type = 32 // request: no body; reply: Info
	// TPause asks the shim to pause the box (Box.Pause): save the VM into
	// the box directory and end it, its helpers and the shim. No body; the
	// shim answers an empty TPause once the state is saved (then exits),
	// or TError with the box still running.
	TPause Type = 33
	// THold (host to shim only, stream 0, never answered or forwarded):
	// Hold, whether this client has a call under way that the shim cannot
	// see on its streams (a session's cell or command): the box does not
	// pause itself (auto-pause) while a client holds it.
	THold Type = 34
	// TFork asks the shim to save the box for a fork (Box.Fork): the VM is
	// stopped, saved with its memory and its writable disk copied into the
	// box directory (shimapi.ForkStateFile, ForkDiskFile, ForkRecordFile),
	// then runs on. Body: none, or ForkSave; the answer is Paused, or TError.
	TFork Type = 35
	// TNetwork asks the shim to replace the box's outbound network policy
	// while it runs (update_outbound): NetPolicy. The shim answers with
	// the NetPolicy once the network stack enforces it, or TError (a box
	// without a NIC: ErrUnsupported). New connections and names follow
	// it; open connections are kept.
	TNetwork Type = 36
	// THandOver hands a warm pool's running box to its new owner
	// (Runtime.Create with a pool of its shape): HandOver. The box's
	// machine is its own already (a pool box gets a fresh Identity with a
	// boot id and a machine id, as a fork's, when it enters the pool); the
	// shim gives it the owner's hostname (a new Identity, only when it
	// differs) and lifecycle settings, then answers with the HandOver it
	// applied, or TError (the box is then no one's to hand over: the
	// runtime removes it).
	THandOver Type = 40
)

var typeNames = map[Type]string{
	THello: "hello", TStarted: "started", TStdout: "stdout", TStderr: "stderr", TExit: "exit",
	TError: "error", TCredit: "credit", TExec: "exec", TStdin: "stdin", TStdinClose: "stdin-close",
	TSignal: "signal", TCancel: "cancel", TShutdown: "shutdown", TResize: "resize", TInfo: "info",
	TCopyDone: "copy-done", TCopyIn: "copy-in", TCopyOut: "copy-out", TIdentity: "identity",
	TLane: "lane", TLaneFree: "lane-free",
	TPark: "park", TParked: "parked", TAttach: "attach", TPause: "pause", TClock: "clock", THold: "hold", TFork: "fork",
	TTunnel: "tunnel", TEOF: "eof", TNetwork: "network", TWatch: "watch", TReleaseRoot: "release-root",
	TRootUsage: "root-usage", THandOver: "hand-over",
}

// Last reports whether a frame of type t from the agent ends its stream.
func (t Type) Last() bool { return t == TExit || t == TError || t == TCopyDone || t == TParked }

// Features an agent lists in Hello.Features. A host checks for one before it
// uses a request field that an older agent would silently ignore.
const (
	// FeatureTTY: Exec.Tty, Exec.Rows/Cols and TResize are implemented.
	FeatureTTY = "tty"
	// FeatureSandbox: the box's processes run walled off from the agent
	// (own PID, mount, IPC and UTS namespaces, container root, docker's
	// capabilities minus MKNOD, a seccomp filter). Started.Pid is then the
	// process's pid inside the box.
	FeatureSandbox = "sandbox"
	// FeatureNetwork: the agent brings up the NIC the host describes on the
	// kernel command line (boxlite.net=) and gives the box its resolv.conf
	// and hosts; boot fails when it cannot.
	FeatureNetwork = "network"
	// FeatureCopy: TCopyIn and TCopyOut are implemented (no tar or shell
	// needed in the image).
	FeatureCopy = "copy"
	// FeatureIdentity: TIdentity is implemented.
	FeatureIdentity = "identity"
	// FeaturePark: TPark is implemented.
	FeaturePark = "park"
	// FeatureSignalGroup: Signal.Group is implemented.
	FeatureSignalGroup = "signal-group"
	// FeatureLane: the agent found the lane disk (LaneSerial) and moves a
	// copy's data through it when the request asks (CopyIn.Lane,
	// CopyOut.Lane); frames then carry only TLane and TLaneFree.
	FeatureLane = "lane"
	// FeatureExecDetach: Exec.Detach and TAttach are implemented (detach.go).
	FeatureExecDetach = "exec-detach"
	// FeatureClock: TClock is implemented.
	FeatureClock = "clock"
	// FeatureTrustCA: Identity.TrustCA is implemented.
	FeatureTrustCA = "trust-ca"
	// FeatureTunnel: TTunnel and TEOF are implemented.
	FeatureTunnel = "tunnel"
	// FeatureWatch: TWatch is implemented.
	FeatureWatch = "watch"
	// FeatureExecRoot: Exec.Root, Exec.RootBinds and TReleaseRoot are
	// implemented.
	FeatureExecRoot = "exec-root"
	// FeatureRootUsage: TRootUsage is implemented.
	FeatureRootUsage = "root-usage"
	// FeatureExecRlimits: Exec.Groups and Exec.Rlimits are implemented.
	FeatureExecRlimits = "exec-rlimits"
)

// The lane is a raw disk of the box that a copy's bulk data crosses: QEMU
// moves a virtio-blk request's bytes natively, many times faster than the
// channel's 4 KiB at a time. It is cut into slots of LaneSlot bytes.
const (
	LaneSerial = "boxlite-lane" // see also names.go
	LaneSlot   = 1 << 20
	// MaxLaneSlots caps CopyIn.Lane and CopyOut.Lane.
	MaxLaneSlots = 1024
)

// Hello is the agent's first frame: who it is and how long boot took, as
// measured by the guest's own clock (CLOCK_BOOTTIME).
type Hello struct {
	Version      int     `msgpack:"version"`
	Agent        string  `msgpack:"agent,omitempty"`  // agent build
	Kernel       string  `msgpack:"kernel,omitempty"` // uname -r -v of the guest
	KernelMs     float64 `msgpack:"kernel_ms"`        // boot to agent start
	ReadyMs      float64 `msgpack:"ready_ms"`         // boot to hello (modules, mounts done)
	Layers       int     `msgpack:"layers,omitempty"` // image layers mounted
	WritableDisk bool    `msgpack:"writable_disk,omitempty"`
	// Features lists what this agent implements beyond version 1 (Feature*).
	Features []string `msgpack:"features,omitempty"`
}

// Caps on what a Hello may carry into the host's box info.
const (
	maxHelloString   = 256
	maxHelloFeatures = 64
)

// Bound cuts what the guest claims in h to sizes the host keeps: the
// strings (at most 256 bytes, one line of valid UTF-8 without control
// characters: safetext.Line), the features (at most 64) and
// the timings (not negative).
func (h *Hello) Bound() {
	cut := func(s string) string {
		if len(s) > maxHelloString {
			s = s[:maxHelloString]
		}
		return safetext.Line(s) // printed in box info and errors
	}
	h.Agent, h.Kernel = cut(h.Agent), cut(h.Kernel)
	if len(h.Features) > maxHelloFeatures {
		h.Features = h.Features[:maxHelloFeatures]
	}
	for i, f := range h.Features {
		h.Features[i] = cut(f)
	}
	h.KernelMs, h.ReadyMs = max(h.KernelMs, 0), max(h.ReadyMs, 0)
	h.Layers = max(h.Layers, 0)
}

// Has reports whether the agent listed feature in its Hello.
func (h Hello) Has(feature string) bool {
	for _, f := range h.Features {
		if f == feature {
			return true
		}
	}
	return false
}

// Identity is what makes a box its own machine. The host sends it once the
// agent has said hello, and again after every start from a template, whose
// memory is a copy of another VM's: the same kernel RNG state, clock and
// hostname, until this arrives.
type Identity struct {
	// UnixNano is the host's wall clock; the guest steps its own to it.
	UnixNano int64 `msgpack:"unix_nano"`
	// Seed is host randomness (MinSeed to MaxSeed bytes) the guest mixes
	// into its kernel RNG, crediting it, before it reseeds the RNG.
	Seed []byte `msgpack:"seed"`
	// Hostname is the box's (1 to 64 bytes, a DNS label's characters).
	Hostname string `msgpack:"hostname"`
	// BootID, when set (a fork of a running box, whose kernel already
	// made its boot id), is the boot id the box's processes read from
	// /proc/sys/kernel/random/boot_id (a UUID, 36 bytes in the kernel's
	// form), and MachineID its /etc/machine-id (32 lowercase hex digits;
	// written only where the box has that file).
	BootID    string `msgpack:"boot_id,omitempty"`
	MachineID string `msgpack:"machine_id,omitempty"`
	// TrustCA, when set (a box with secrets), is a CA certificate in PEM
	// (at most MaxTrustCA bytes) the agent adds to the box's trust stores:
	// the system bundle, Python's certifi bundles, and a file of its own
	// (TrustCAPath) that NODE_EXTRA_CA_CERTS names.
	TrustCA string `msgpack:"trust_ca,omitempty"`
}

// MaxTrustCA bounds Identity.TrustCA; TrustCAPath is where the agent
// writes it in the box (where update-ca-certificates finds it too).
const (
	MaxTrustCA  = 8 << 10
	TrustCAPath = "/usr/local/share/ca-certificates/boxlite-secrets.crt"
)

// Tunnel is TTunnel's body: the TCP port on the box's 127.0.0.1.
type Tunnel struct {
	Port int `msgpack:"port"`
}

// MaxPort is the highest TCP port.
const MaxPort = 65535

// TunnelDialTimeout bounds the agent's connect to a tunnel's port.
const TunnelDialTimeout = 10 * time.Second

// Clock is TClock's body.
type Clock struct {
	UnixNano int64 `msgpack:"unix_nano"` // the host's wall clock
}

// Bounds of Identity.Seed.
const (
	MinSeed = 32
	MaxSeed = 512
)

// Check reports what is wrong with id, as errdefs.ErrInvalidArgument.
func (id Identity) Check() error {
	if len(id.TrustCA) > MaxTrustCA || (id.TrustCA != "" && !strings.HasPrefix(id.TrustCA, "-----BEGIN CERTIFICATE-----")) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "identity: trust_ca is not one PEM certificate of at most %d bytes", MaxTrustCA)
	}
	if n := len(id.Seed); n < MinSeed || n > MaxSeed {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "identity: seed of %d bytes, want %d to %d", n, MinSeed, MaxSeed)
	}
	if !ValidHostname(id.Hostname) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "identity: hostname %q: want 1 to 64 of [A-Za-z0-9-], not starting or ending with -", id.Hostname)
	}
	if id.BootID != "" && !validUUID(id.BootID) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "identity: boot id %q is not a UUID", id.BootID)
	}
	if id.MachineID != "" && (len(id.MachineID) != 32 || !lowerHex(id.MachineID)) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "identity: machine id %q is not 32 lowercase hex digits", id.MachineID)
	}
	return nil
}

// validUUID reports whether s is a UUID as the kernel prints one
// (8-4-4-4-12 lowercase hex digits).
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !lowerHex(string(c)) {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// ValidHostname reports whether s is a hostname a box can have: one DNS
// label of at most 64 bytes (the kernel's limit).
func ValidHostname(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

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

// RootUsage is what the processes of a process root use, summed over
// them from the box's /proc (the box has no cgroups): CPU time of the
// live processes and of the children they waited for, their resident
// memory (pages shared between them counted once per process).
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

// CopyIn receives a tar stream into the box at Dest, by docker cp's rules
// (see filecopy.Prepare). Box paths resolve inside the box's root, its
// symlinks as in the box.
type CopyIn struct {
	Dest string `msgpack:"dest"`
	// Name is the source's name, the stream's top-level entry; empty: the
	// stream holds a directory's contents.
	Name      string `msgpack:"name,omitempty"`
	Overwrite bool   `msgpack:"overwrite"`
	// Lane, when not 0 (needs FeatureLane), is how many slots from the
	// lane's start the copy may use: the host writes the tar stream there
	// and announces each chunk with TLane; the agent frees slots with
	// TLaneFree. TStdinClose still ends the stream.
	Lane int `msgpack:"lane,omitempty"`
}

// CopyOut sends the box path Src as a tar stream: Src itself under its own
// name or, with Contents, the directory's entries. Follow follows Src if it
// is a symlink.
type CopyOut struct {
	Src      string `msgpack:"src"`
	Contents bool   `msgpack:"contents,omitempty"`
	Follow   bool   `msgpack:"follow,omitempty"`
	// Lane, as CopyIn.Lane: the agent writes the tar stream into the
	// lane's slots and announces each chunk with TLane; the host frees
	// them with TLaneFree.
	Lane int `msgpack:"lane,omitempty"`
}

// Watch asks for the changes under the box directory Path (resolved as
// the box's processes see it, through no symlink below the box's root):
// its entries', and with Recursive its subdirectories' too, to
// MaxWatchDepth levels and MaxWatches directories in all (more: ErrLimit).
type Watch struct {
	Path      string `msgpack:"path"`
	Recursive bool   `msgpack:"recursive,omitempty"`
}

// Bounds of one watch.
const (
	MaxWatches    = 8192
	MaxWatchDepth = 32
)

// A watch's events, as the agent sends them: each a WatchRecord, one byte
// of WatchOp, two bytes of big-endian length, then the name, relative to
// the watched directory ("" for the directory itself), at most
// MaxWatchName bytes.
type WatchOp byte

const (
	WatchCreate   WatchOp = 1 // made, or moved in
	WatchWrite    WatchOp = 2 // written and closed, or modified
	WatchRemove   WatchOp = 3 // removed
	WatchRename   WatchOp = 4 // moved away (its new name, if watched, is a WatchCreate)
	WatchChmod    WatchOp = 5 // its mode, owner or times changed
	WatchOverflow WatchOp = 6 // events were lost (the kernel's queue overflowed); no name
)

// MaxWatchName bounds a WatchRecord's name.
const MaxWatchName = 4096

// AppendWatchRecord appends one event's record to b.
func AppendWatchRecord(b []byte, op WatchOp, name string) []byte {
	if len(name) > MaxWatchName {
		name = name[:MaxWatchName]
	}
	return append(append(b, byte(op), byte(len(name)>>8), byte(len(name))), name...)
}

// LaneChunk is a chunk of a copy's data in the lane: Len bytes (1 to
// LaneSlot) at Off, which is the start of the sender's next slot.
type LaneChunk struct {
	Off int64 `msgpack:"off"`
	Len int   `msgpack:"len"`
}

// LaneFree gives back the oldest Slots chunks' slots.
type LaneFree struct {
	Slots int `msgpack:"slots"`
}

// CopyDone ends a copy stream that succeeded, with what the agent counted.
type CopyDone struct {
	Entries int64 `msgpack:"entries"`
	Bytes   int64 `msgpack:"bytes"`
	Skipped int64 `msgpack:"skipped,omitempty"` // device nodes, FIFOs, sockets
}

// Info is the shim's description of its box.
type Info struct {
	Hello       Hello   `msgpack:"hello"`
	Accel       string  `msgpack:"accel"`
	AccelReason string  `msgpack:"accel_reason"`
	ShimPid     int     `msgpack:"shim_pid"`
	VMMPid      int     `msgpack:"vmm_pid"`
	BootMs      float64 `msgpack:"boot_ms"` // host wall time from VMM start to hello
	// Start is how the VM came up: StartBoot, StartTemplate or
	// StartNewTemplate; StartNote says why a box that could have started
	// from a template booted instead.
	Start     string `msgpack:"start,omitempty"`
	StartNote string `msgpack:"start_note,omitempty"`
	// Warnings name what weakens this box's isolation: TCG, a confinement
	// layer the host could not give the VMM.
	Warnings []string `msgpack:"warnings,omitempty"`
	// Network is the box's network; nil when it has none.
	Network *NetworkInfo `msgpack:"network,omitempty"`
	// Metrics are the shim's counters and samples when the info was asked
	// for; nil from a shim that predates them.
	Metrics *ShimMetrics `msgpack:"metrics,omitempty"`
	// StartedAtMs is when the VM became ready (Unix milliseconds, host
	// clock); 0 from a shim that predates it.
	StartedAtMs int64 `msgpack:"started_at_ms,omitempty"`
}

// Hold is THold's body.
type Hold struct {
	On bool `msgpack:"on"`
}

// Paused is the shim's answer to TPause: the box's state is saved.
// ForkSave is TFork's body. DiskOnly saves only the disk at that instant
// (a snapshot of a running box's disk: ForkDiskFile), not the memory. Into
// is a directory of the box directory, made by the client, that the files
// go into (shimapi.ValidSaveDir); empty: the box directory.
type ForkSave struct {
	DiskOnly bool   `msgpack:"disk_only,omitempty"`
	Into     string `msgpack:"into,omitempty"`
}

type Paused struct {
	StateBytes int64   `msgpack:"state_bytes"` // the saved state's size on disk
	SaveMs     float64 `msgpack:"save_ms"`     // VM stopped to state synced
}

// Info.Start values.
const (
	StartBoot        = "boot"         // booted its kernel
	StartTemplate    = "template"     // restored from a template (a warm start)
	StartNewTemplate = "new-template" // booted a template VM, saved it, then restored from it
	StartResume      = "resume"       // restored from the state its own pause saved
)

// ShimMetrics is what a box's shim counts and samples. The shim counts
// on its side of the channel, for every client of the box, and takes no
// count from the guest. Counters are totals since the shim started.
type ShimMetrics struct {
	// Execs counts the exec requests clients sent; ExecErrors those of
	// them that never ran: refused by the shim, or answered by the agent
	// with an error instead of Started (no such binary, unknown user, ...).
	Execs      uint64 `msgpack:"execs"`
	ExecErrors uint64 `msgpack:"exec_errors"`
	// StdinBytes counts the stdin bytes clients sent to execs; OutputBytes
	// the stdout and stderr bytes execs sent back (copies are not counted).
	StdinBytes  uint64 `msgpack:"stdin_bytes"`
	OutputBytes uint64 `msgpack:"output_bytes"`
	// CPUPercent is the CPU time the VMM used, in percent of one host CPU
	// (up to 100 times the box's vCPUs, as top and docker stats count),
	// from the shim's latest sample at least CPUSampleInterval old to now.
	// The shim samples when metrics are asked for, not on a timer (an idle
	// box costs no wake-ups): asked every second, it is the last second's;
	// asked once, the average since the VMM started.
	CPUPercent float64 `msgpack:"cpu_percent"`
	// MemoryBytes is the VMM's resident memory (VmRSS): the guest RAM it
	// has touched plus QEMU's own.
	MemoryBytes uint64 `msgpack:"memory_bytes"`
}

// CPUSampleInterval is the shortest window of ShimMetrics.CPUPercent.
const CPUSampleInterval = time.Second

// NetPolicy is TNetwork's body: the outbound policy from now on.
type NetPolicy struct {
	Outbound string   `msgpack:"outbound"` // "enabled" or "disabled" (the NIC stays, nothing is reachable)
	AllowNet []string `msgpack:"allow_net,omitempty"`
}

// NetworkInfo describes a box's network as its shim runs it.
type NetworkInfo struct {
	GuestIP   string `msgpack:"guest_ip" json:"guest_ip"`
	GatewayIP string `msgpack:"gateway_ip" json:"gateway_ip"`
	// Outbound is "disabled" when the box's outbound network was turned
	// off while it runs (TNetwork); "" or "enabled" otherwise.
	Outbound string   `msgpack:"outbound,omitempty" json:"outbound,omitempty"`
	AllowNet []string `msgpack:"allow_net,omitempty" json:"allow_net,omitempty"`
	Ports    []Port   `msgpack:"ports,omitempty" json:"ports,omitempty"`
	// Stats are the network's counters when the info was asked for.
	Stats *NetworkStats `msgpack:"stats,omitempty" json:"stats,omitempty"`
}

// NetworkStats counts what a box's network did.
type NetworkStats struct {
	BytesToGuest   uint64 `msgpack:"bytes_to_guest" json:"bytes_to_guest"`
	BytesFromGuest uint64 `msgpack:"bytes_from_guest" json:"bytes_from_guest"`
	TCPConns       uint64 `msgpack:"tcp_connections" json:"tcp_connections"`
	UDPFlows       uint64 `msgpack:"udp_flows" json:"udp_flows"`
	DNSQueries     uint64 `msgpack:"dns_queries" json:"dns_queries"`
	// Blocked counts connections, flows and names allow_net refused;
	// Dropped those refused because a bound on open connections was met.
	Blocked uint64 `msgpack:"blocked" json:"blocked"`
	Dropped uint64 `msgpack:"dropped" json:"dropped"`
}

// Port is a published port: HostIP:HostPort on the host reaches GuestPort
// in the box. HostPort 0 asks for a free port; Protocol is "tcp" or "udp".
type Port struct {
	Protocol  string `msgpack:"protocol" json:"protocol"`
	HostIP    string `msgpack:"host_ip,omitempty" json:"host_ip,omitempty"`
	HostPort  int    `msgpack:"host_port" json:"host_port"`
	GuestPort int    `msgpack:"guest_port" json:"guest_port"`
}

// Encode builds a frame with a msgpack body (nil v means no body).
func Encode(t Type, stream uint32, v any) (Frame, error) {
	f := Frame{Type: t, Stream: stream}
	if v == nil {
		return f, nil
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s: %w", t, err)
	}
	f.Payload = b
	return f, nil
}

// Decode reads f's msgpack body into v. A malformed body is an
// ErrInvalidArgument naming the frame type.
func Decode(f Frame, v any) error {
	if err := validate(f.Payload); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "decode %s frame: %v", f.Type, err)
	}
	if err := msgpack.Unmarshal(f.Payload, v); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "decode %s frame: %v", f.Type, err)
	}
	return nil
}
