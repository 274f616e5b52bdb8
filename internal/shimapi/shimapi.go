package shimapi

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Files of a box directory.
const (
	ConfigFile  = "shim.json"   // Config, written by the runtime
	SocketFile  = "shim.sock"   // where host clients connect
	ExitFile    = "exit.json"   // Exit, written by the shim when the box ends
	LogFile     = "shim.log"    // the shim's own log (stdout and stderr)
	ConsoleFile = "console.log" // the guest's serial console, capped by the shim
	DiskFile    = "disk.ext4"   // the box's writable disk
	// LockFile is flock'ed by the box's shim for its whole life: one box,
	// one VM. Whoever fails to take it joins the running box instead. The
	// shim writes its pid in it (decimal, a newline) as soon as it holds
	// it, before it has a socket; a runtime that takes it for a disk
	// operation writes nothing. A pid read here names the box's shim only
	// while that process holds the lock (see core's lockHolder).
	LockFile = "shim.lock"
	// LaneFile is the box's lane (protocol.LaneSerial): a sparse file of
	// LaneSize bytes the shim makes for each VM start and removes after it.
	// A copy's host side reads and writes it directly, flock'ed for the
	// copy's length: one copy at a time uses the lane.
	LaneFile = "lane.raw"
)

// LaneSize is the lane's size: 64 slots of protocol.LaneSlot bytes. It is
// fixed, so the guest can never make the file use more host disk.
const LaneSize = 64 * protocol.LaneSlot

// Config is what the runtime hands the shim for one box start: what the box
// is, never how its VM is built (the shim decides that: accelerator, devices,
// confinement).
type Config struct {
	BoxID string `json:"box_id"`
	Dir   string `json:"dir"` // the box directory; the files above live here

	Kernel    string   `json:"kernel"`
	Initrd    string   `json:"initrd"`
	QEMU      string   `json:"qemu,omitempty"` // the VMM binary; default qemu-system-x86_64 on PATH
	MemoryMiB int      `json:"memory_mib"`
	CPUs      int      `json:"cpus"`
	Layers    []string `json:"layers"` // read-only ext4 images of the image's layers, bottom first
	// Accel is "kvm", "tcg" or empty (detect); RequireKVM refuses to fall
	// back to TCG, which is not a security boundary.
	Accel      string `json:"accel,omitempty"`
	RequireKVM bool   `json:"require_kvm,omitempty"`

	// BootTimeout is the boot's budget of VMM CPU time from VMM start to
	// the agent's hello: a guest starved by other boxes is slow, a hung one
	// spins. The wall-clock wait is bounded too, by BootWallFactor times it.
	BootTimeout time.Duration `json:"boot_timeout"`
	StopTimeout time.Duration `json:"stop_timeout"` // shutdown request to VMM exit, then kill
	// OwnerUID is the only uid (besides root) whose clients the shim serves.
	OwnerUID int `json:"owner_uid"`
	// AutoRemove: the box directory is deleted after the box ends because
	// its creator died, or, for a detached box (no parent-death pipe), after
	// it ends at all: nobody may be left to remove it.
	AutoRemove bool `json:"auto_remove,omitempty"`
	// Detach: the box outlives its creator; there is no parent-death pipe
	// on fd 4 (which then may be any fd the shim's own runtime opened).
	Detach bool `json:"detach,omitempty"`
	// Network is the box's network; nil: none at all (only lo in the box,
	// no network stack in the shim).
	Network *Network `json:"network,omitempty"`
	// Secrets: the box has secrets (SecretsFile in Dir); the shim hands
	// them to the network stack and the CA's certificate to the agent.
	Secrets bool `json:"secrets,omitempty"`
	// Sandbox: how the guest walls off the box's processes, sent to the
	// agent in its identity; nil: the default (protocol.SandboxPolicy).
	Sandbox *protocol.SandboxPolicy `json:"sandbox,omitempty"`
	// NoJail: QEMU runs as a plain child, not in the host jail (BoxLite's
	// SecurityOptions.jailer_enabled=false).
	NoJail bool `json:"no_jail,omitempty"`
	// HealthCheck: the shim checks the box's health this way (health.go).
	HealthCheck *protocol.HealthCheck `json:"health_check,omitempty"`
	// Netstack is the network stack's binary (cmd/boxlite-net), required
	// with Network.
	Netstack string `json:"netstack,omitempty"`

	// Volumes are host files and directories the box mounts (validated by
	// the runtime); Virtiofsd is the daemon that serves them, required
	// with any.
	Volumes   []Volume `json:"volumes,omitempty"`
	Virtiofsd string   `json:"virtiofsd,omitempty"`

	// KernelArgs are added to the guest kernel's command line, before
	// boxlite's own words (validated by the runtime).
	KernelArgs []string `json:"kernel_args,omitempty"`

	// Hostname is the box's (the runtime's default when it sets none).
	Hostname string `json:"hostname,omitempty"`

	// Templates, when set, is the directory of the image's warm-start
	// templates (package template): the box starts from the template of
	// its shape, which the shim makes first if there is none. The runtime
	// sets it only for a box's first start (its disk is the fresh one a
	// template's replaces) without volumes. Empty: the VM boots.
	Templates string `json:"templates,omitempty"`
	// Park lists execs a template VM starts before it is saved (protocol.TPark:
	// a session's interpreter), so that a box restored from it finds them
	// started; each entry is alternatives, tried in order until one parks
	// (the interpreters a session would try). They are part of the
	// template's shape. Only with Templates.
	Park [][]protocol.Exec `json:"park,omitempty"`
	// Resume: the box is paused (PausedFile); the shim restores its VM
	// from StateFile instead of booting, or, if the state no longer fits,
	// discards it and fails (the box is then stopped, with its disk).
	Resume bool `json:"resume,omitempty"`
	// AutoPause: the shim pauses the box (as TPause, with no client to
	// answer) once it has been idle this long; 0: never. See
	// internal/shim/idle.go for what counts as activity.
	AutoPause time.Duration `json:"auto_pause,omitempty"`
	// Pool: a warm pool's box, which its runtime hands over once
	// (protocol.THandOver); the shim refuses a hand-over of any other box.
	Pool bool `json:"pool,omitempty"`
}

// Network is a box's network: where it may connect (AllowNet, as
// netpolicy parses it; empty: anywhere) and the ports it publishes.
type Network struct {
	AllowNet []string        `json:"allow_net,omitempty"`
	Deny     bool            `json:"deny,omitempty"` // outbound turned off: the NIC, but nothing reachable
	Ports    []protocol.Port `json:"ports,omitempty"`
	// NetNS: the NIC is a tap in this network namespace, redirected to
	// and from its interface (boxlite.NetworkSpec.NetNS); no network
	// stack then.
	NetNS string `json:"netns,omitempty"`
}

// BootWallFactor bounds a boot's wall-clock wait: BootWallFactor times its
// BootTimeout, however little CPU the VMM got.
const BootWallFactor = 10

// Path is the path of a file of the box directory.
func (c Config) Path(name string) string { return filepath.Join(c.Dir, name) }

// Ready is the shim's one message to its parent on the ready pipe: the box's
// info once the agent said hello, or why the box failed to boot.
type Ready struct {
	Info *protocol.Info `json:"info,omitempty"`
	// Running: another shim holds the box's lock (it runs or starts the
	// box), so this one did nothing; join that one.
	Running bool `json:"running,omitempty"`
	// StateRefused: a resume found the box's saved state no longer fits
	// (Compat); the shim discarded it, and the box is stopped.
	StateRefused bool   `json:"state_refused,omitempty"`
	Kind         string `json:"kind,omitempty"`
	Error        string `json:"error,omitempty"`
}

// Exit records why a box ended, for the next client that asks.
type Exit struct {
	Reason string `json:"reason"`
	// Fault: the box ended because something failed (its VMM, agent,
	// network stack or volumes), not on request or with its creator; the
	// runtime does not restart such a box on its own (see boxlite.Box.Exec).
	Fault bool      `json:"fault,omitempty"`
	At    time.Time `json:"at"`
}

// SweepCommand is boxlite-shim's subcommand that removes what a killed shim
// of a box left behind: `boxlite-shim sweep BOX-ID`.
const SweepCommand = "sweep"

// CgroupPrefix starts the names of the cgroups of a box's confined processes
// (its VMM and helpers).
func CgroupPrefix(boxID string) string { return "boxlite-" + boxID }

// LockContent is what the shim writes in LockFile: its pid, and "ended"
// once its box has ended (its exit record written, its socket about to
// go), so that a runtime reading a lock held without a socket can tell a
// shim still booting the box from one finishing.
func LockContent(pid int, ended bool) []byte {
	if ended {
		return []byte(strconv.Itoa(pid) + " ended\n")
	}
	return []byte(strconv.Itoa(pid) + "\n")
}

// ParseLockContent reads LockContent; ok is false for anything else.
func ParseLockContent(b []byte) (pid int, ended, ok bool) {
	if len(b) == 0 || len(b) > 32 {
		return 0, false, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "ended") {
		return 0, false, false
	}
	pid, err := strconv.Atoi(f[0])
	return pid, len(f) == 2, err == nil && pid > 0
}
