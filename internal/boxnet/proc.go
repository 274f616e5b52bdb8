package boxnet

import (
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// The network stack's process (cmd/boxlite-net), as the shim starts it:
// "boxlite-net CONFIG" with CONFIG a ProcConfig in JSON, and these
// descriptors: the NIC (the VMM's SOCK_SEQPACKET peer), a control socket
// (the stack says it is up, then answers each line: "stats" with its
// counters, ControlPolicy and a ProcPolicy in JSON with "{}" once the new
// outbound policy is in force, or {"error": ...}), a registry socket (the
// stack asks whether a host port is a box's published one: AskPublished,
// AnswerPublished), the secrets pipe (ProcSecretsFD: a ProcSecrets JSON
// object, then EOF; with ProcConfig.Secrets only, else /dev/null), then the
// published ports' listeners, in the order of ProcConfig.Ports. Secrets
// never go on the command line, which every process of the host may read.
const (
	ProcNIC       = 3
	ProcControl   = 4
	ProcRegistry  = 5
	ProcSecretsFD = 6
	ProcFirstPort = 7
	// StatsWait bounds each question either side asks the other.
	StatsWait = time.Second
)

// ControlPolicy starts a control line that replaces the stack's outbound
// policy (a running box's update_outbound).
const ControlPolicy = "policy "

// ProcPolicy is a new outbound policy: Deny allows nothing (the box's
// outbound network turned off while it runs), else AllowNet as at start
// (empty: anywhere).
type ProcPolicy struct {
	AllowNet []string `json:"allow_net,omitempty"`
	Deny     bool     `json:"deny,omitempty"`
}

// ProcConfig is what the stack process is told on its command line.
type ProcConfig struct {
	AllowNet []string        `json:"allow_net,omitempty"`
	Deny     bool            `json:"deny,omitempty"`  // outbound off: allow nothing
	Ports    []protocol.Port `json:"ports,omitempty"` // as bound, in the order of the listeners
	// Secrets: the stack reads ProcSecrets from its secrets pipe.
	Secrets bool `json:"secrets,omitempty"`
}

// ProcSecrets is what the shim writes on the stack's secrets pipe: the
// box's secrets file and the host's trust store (PEM), which the stack
// cannot read inside its jail.
type ProcSecrets struct {
	Secrets  shimapi.Secrets `json:"secrets"`
	RootsPEM string          `json:"roots"`
}

// MaxProcSecrets bounds what the stack reads from its secrets pipe.
const MaxProcSecrets = shimapi.MaxHostRoots + 4<<20
