package shimapi

import (
	"fmt"
	"strings"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Files of a paused box (Box.Pause): the shim that paused it wrote them, and
// the shim that resumes it consumes them.
const (
	// StateFile is the saved VM: QEMU's migration stream of its devices,
	// vCPUs and memory (zero pages as a few bytes each, so it holds about
	// the memory the guest touched and never more than its memory plus
	// PauseOverheadBytes).
	StateFile = "pause.state"
	// PausedFile is the Paused record, written (atomically) after StateFile
	// is whole and synced: a box directory with it is paused.
	PausedFile = "paused.json"
)

// Files of a fork (Box.Fork) in the source box's directory: the source's
// shim writes them at one instant (VM stopped), the runtime makes each fork
// from them and removes them. A fork is a paused box whose record has
// Fork set: its shim gives it a new identity when it resumes.
const (
	ForkStateFile  = "fork.state" // as StateFile
	ForkDiskFile   = "fork.disk"  // the writable disk (DiskFile) at that instant
	ForkRecordFile = "fork.json"  // the Paused record, as PausedFile
)

// SaveDirPrefix starts the name of a directory of the box directory that
// a client makes for one save of the running box (protocol.ForkSave.Into):
// a fork's or a snapshot's files, apart from any other save's.
const SaveDirPrefix = ".save-"

// ValidSaveDir reports whether name may be a ForkSave.Into: SaveDirPrefix
// and 1 to 32 lowercase hex digits, no path.
func ValidSaveDir(name string) bool {
	rest, ok := strings.CutPrefix(name, SaveDirPrefix)
	if !ok || len(rest) == 0 || len(rest) > 32 {
		return false
	}
	for _, c := range []byte(rest) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// PauseOverheadBytes is what a saved state may need beyond the guest's
// memory (device state, the stream's page headers); a pause checks for the
// memory plus this much free disk before it saves.
const PauseOverheadBytes = 64 << 20

// PauseFormat is the version of Paused and its state; a state of another
// format is refused on resume.
const PauseFormat = 1

// Paused is the record of a paused box: what its saved state depends on
// (Compat), compared on resume, and what the resumed box reports.
type Paused struct {
	Format  int       `json:"format"`
	SavedAt time.Time `json:"saved_at"`
	// StateBytes is StateFile's size when written.
	StateBytes int64 `json:"state_bytes"`
	// SaveMs is how long the save took (VM stopped to state synced).
	SaveMs float64        `json:"save_ms"`
	Compat Compat         `json:"compat"`
	Hello  protocol.Hello `json:"hello"` // the agent's, as it said at boot
	Accel  string         `json:"accel"`
	// RAMBackend: the guest's memory was a memory backend object (a VM
	// restored from a template, or with volumes), which a state names; the
	// resumed VM gets one too (QEMU's anonymous memory, hv.AnonRAMBackend).
	RAMBackend bool `json:"ram_backend,omitempty"`
	// Fork: the state is another box's (Box.Fork): the resumed VM gets an
	// identity of its own (protocol.Identity), and the streams that box
	// had open at the save (Cancel: their agent stream ids) are cancelled
	// in it, as if their clients had gone.
	Fork   bool     `json:"fork,omitempty"`
	Cancel []uint32 `json:"cancel,omitempty"`
	// Restored: the state is one of the box's own memory snapshots
	// (Box.RestoreSnapshot), which may be restored many times: as a fork's,
	// its streams at the save are cancelled and it gets the host's clock,
	// fresh entropy and a boot id, but it keeps its hostname and machine id.
	Restored bool `json:"restored,omitempty"`
	// Health is the box's health check state at the save (nil without
	// one), and HealthUpMs how long the box had been ready then: a resume
	// goes on from there (a healthy box stays healthy, the start period
	// does not start again), as docker's unpause. A fork starts anew.
	Health     *protocol.HealthStatus `json:"health,omitempty"`
	HealthUpMs int64                  `json:"health_up_ms,omitempty"`
}

// MaxForkStreams bounds Paused.Cancel.
const MaxForkStreams = 4096

// Compat is what a saved state needs to be restored as it was: the same
// VMM, the same guest kernel and initramfs, the same agent, the same
// machine shape and devices.
type Compat struct {
	QEMUVersion string `json:"qemu_version"` // first line of `qemu --version`
	KernelSHA   string `json:"kernel_sha256"`
	InitrdSHA   string `json:"initrd_sha256"`
	Agent       string `json:"agent"` // Hello.Agent
	MemoryMiB   int    `json:"memory_mib"`
	CPUs        int    `json:"cpus"`
	// Devices names the VM's devices in order (disks by serial and the
	// file each is, the NIC, the channel, the accelerator).
	Devices []string `json:"devices"`
}

// Mismatch says how c (the saved) differs from now; "" when it does not.
func (c Compat) Mismatch(now Compat) string {
	diff := func(what string, a, b any) string { return fmt.Sprintf("%s was %v, is now %v", what, a, b) }
	switch {
	case c.QEMUVersion != now.QEMUVersion:
		return diff("QEMU", c.QEMUVersion, now.QEMUVersion)
	case c.KernelSHA != now.KernelSHA:
		return diff("the guest kernel (sha256)", c.KernelSHA, now.KernelSHA)
	case c.InitrdSHA != now.InitrdSHA:
		return diff("the guest initramfs (sha256)", c.InitrdSHA, now.InitrdSHA)
	case c.Agent != now.Agent && now.Agent != "":
		return diff("the guest agent", c.Agent, now.Agent)
	case c.MemoryMiB != now.MemoryMiB:
		return diff("memory (MiB)", c.MemoryMiB, now.MemoryMiB)
	case c.CPUs != now.CPUs:
		return diff("cpus", c.CPUs, now.CPUs)
	case fmt.Sprint(c.Devices) != fmt.Sprint(now.Devices):
		return diff("the devices", c.Devices, now.Devices)
	}
	return ""
}
