package protocol

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/boxlite/boxlite/errdefs"
)

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
	// Health is the box's health check's state; nil: it has none.
	Health *HealthStatus `msgpack:"health,omitempty"`
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
	// TCPErrors counts the box's TCP connections the host could not open
	// (refused, unreachable, timed out; TLS to a secret's host failed).
	TCPErrors  uint64 `msgpack:"tcp_errors" json:"tcp_errors"`
	UDPFlows   uint64 `msgpack:"udp_flows" json:"udp_flows"`
	DNSQueries uint64 `msgpack:"dns_queries" json:"dns_queries"`
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
