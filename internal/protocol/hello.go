package protocol

import (
	"math"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/safetext"
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
	h.KernelMs, h.ReadyMs = nonNegative(h.KernelMs), nonNegative(h.ReadyMs)
	h.Layers = max(h.Layers, 0)
}

// nonNegative is v, or 0 for a negative, NaN or infinite v (max keeps a
// NaN, and JSON cannot carry either).
func nonNegative(v float64) float64 {
	if v >= 0 && !math.IsInf(v, 1) {
		return v
	}
	return 0
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
	// Sandbox, when set (a box whose options change the default), is how
	// the sandbox walls off box processes; nil: the default (DefaultCaps,
	// the seccomp filter). A sandbox already running under another policy
	// is restarted, ending its processes.
	Sandbox *SandboxPolicy `msgpack:"sandbox,omitempty"`
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
	if id.Sandbox != nil {
		if err := id.Sandbox.Check(); err != nil {
			return err
		}
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
