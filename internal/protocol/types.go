package protocol

import (
	"time"
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
	// TRootCgroup (needs FeatureRootCgroup): RootCgroup, give a process
	// root (Exec.Root: a container's) a cgroup of its own in the box,
	// named by the host, and set its limits; the root's later processes
	// start in it (made only by the agent, under /sys/fs/cgroup/boxlite/).
	// Sent again, it changes the limits of the running root (Update). The
	// agent answers TCopyDone (an empty one) or TError, on the stream.
	// TReleaseRoot kills what still runs in the cgroup and removes it.
	TRootCgroup Type = 41
	// TRootOOM (needs FeatureRootCgroup): RootOOMRequest, watch a root's
	// cgroup for OOM kills (its memory.events, with inotify). The agent
	// sends the cgroup's oom_kill count as a RootOOMRecord (within the
	// window, in TStdout frames; the host credits fd 1) when the watch
	// begins and each time the count grows, until the host cancels
	// (TCancel) or the cgroup goes (TCopyDone), or TError.
	TRootOOM Type = 42

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
	// TLaneAsk, agent to host on an exec stream whose Exec.Lane is set:
	// no body. The exec's stdout is throughput-bound; the host answers
	// with TLaneGrant.
	TLaneAsk Type = 43
	// TLaneGrant, host to agent: LaneGrant, the answer to TLaneAsk. With
	// Slots > 0 the exec's stdout goes on as TLane chunks in slots 0 to
	// Slots-1 in turn (the host frees each with TLaneFree once its bytes
	// were read); with 0 it stays on the channel.
	TLaneGrant Type = 44
)

var typeNames = map[Type]string{
	THello: "hello", TStarted: "started", TStdout: "stdout", TStderr: "stderr", TExit: "exit",
	TError: "error", TCredit: "credit", TExec: "exec", TStdin: "stdin", TStdinClose: "stdin-close",
	TSignal: "signal", TCancel: "cancel", TShutdown: "shutdown", TResize: "resize", TInfo: "info",
	TCopyDone: "copy-done", TCopyIn: "copy-in", TCopyOut: "copy-out", TIdentity: "identity",
	TLane: "lane", TLaneFree: "lane-free",
	TPark: "park", TParked: "parked", TAttach: "attach", TPause: "pause", TClock: "clock", THold: "hold", TFork: "fork",
	TTunnel: "tunnel", TEOF: "eof", TNetwork: "network", TWatch: "watch", TReleaseRoot: "release-root",
	TRootUsage: "root-usage", THandOver: "hand-over", TRootCgroup: "root-cgroup", TRootOOM: "root-oom",
	TLaneAsk: "lane-ask", TLaneGrant: "lane-grant",
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
	// FeatureRootCgroup: the box has cgroup v2 (memory, cpu, pids) and
	// TRootCgroup, TRootOOM and the cgroup fields of RootUsage are
	// implemented.
	FeatureRootCgroup = "root-cgroup"
	// FeatureExecRlimits: Exec.Groups and Exec.Rlimits are implemented.
	FeatureExecRlimits = "exec-rlimits"
	// FeatureSandboxPolicy: Identity.Sandbox is implemented.
	FeatureSandboxPolicy = "sandbox-policy"
	// FeatureExecLane: Exec.Lane, TLaneAsk and TLaneGrant are implemented:
	// an exec's bulk stdout may cross the lane.
	FeatureExecLane = "exec-lane"
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
