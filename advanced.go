package boxlite

import (
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
)

// BoxLite 0.10's AdvancedBoxOptions: capabilities and security (this file);
// docs/security-options.md says what each setting changes here.

// Capabilities changes the capability set of the box's processes
// (BoxLite's ContainerCapabilities): Add to the default set
// (protocol.DefaultCaps: docker's without MKNOD), then Drop. Names as
// Linux's, with or without CAP_, any case; "ALL" is every one.
type Capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// SecurityOptions are BoxLite's isolation settings (see its presets
// SecurityDevelopment, SecurityStandard, SecurityMaximum). Here:
//   - JailerEnabled: the box's VMM runs in the host jail (its own
//     namespaces, uid, cgroup, seccomp filter, no_new_privs); off, QEMU runs
//     as a plain child of the shim.
//   - SeccompEnabled: box processes run under the box's seccomp filter in
//     the guest; off, without it.
//   - Max*: resource limits (hard and soft) of every process the box runs,
//     set by the guest agent before the program starts (RLIMIT_NOFILE,
//     RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU); an exec's own
//     Rlimits of the same type win. Linux does not hold root to
//     RLIMIT_NPROC: MaxProcesses binds the box's other users only.
//   - NetworkEnabled (macOS-only in BoxLite): false is refused, use
//     WithNetwork(NetworkSpec{Mode: NetworkDisabled}).
//   - CloseFDs: the shim and the VMM are always started with only the
//     descriptors they use; false changes nothing.
type SecurityOptions struct {
	JailerEnabled  bool    `json:"jailer_enabled"`
	SeccompEnabled bool    `json:"seccomp_enabled"`
	MaxOpenFiles   *uint64 `json:"max_open_files,omitempty"`
	MaxFileSize    *uint64 `json:"max_file_size,omitempty"` // bytes
	MaxProcesses   *uint64 `json:"max_processes,omitempty"`
	MaxMemory      *uint64 `json:"max_memory,omitempty"`   // bytes of address space
	MaxCPUTime     *uint64 `json:"max_cpu_time,omitempty"` // seconds
	NetworkEnabled bool    `json:"network_enabled"`
	CloseFDs       bool    `json:"close_fds"`
}

func u64(n uint64) *uint64 { return &n }

// SecurityDevelopment is BoxLite's development(): no host jail, no seccomp
// filter in the box, for debugging what isolation gets in the way of.
func SecurityDevelopment() SecurityOptions {
	return SecurityOptions{NetworkEnabled: true}
}

// SecurityStandard is BoxLite's standard(), and a box's default: the host
// jail and the box's seccomp filter.
func SecurityStandard() SecurityOptions {
	return SecurityOptions{JailerEnabled: true, SeccompEnabled: true, NetworkEnabled: true, CloseFDs: true}
}

// SecurityMaximum is BoxLite's maximum(): standard, and box processes
// limited to 1024 open files, files of 1 GiB and 100 processes (see
// SecurityOptions.MaxProcesses).
func SecurityMaximum() SecurityOptions {
	s := SecurityStandard()
	s.MaxOpenFiles, s.MaxFileSize, s.MaxProcesses = u64(abi.SecurityMaximumMaxOpenFiles), u64(abi.SecurityMaximumMaxFileSizeBytes), u64(abi.SecurityMaximumMaxProcesses)
	return s
}

// WithCapabilities adds and drops capabilities of the box's processes; an
// unknown name is ErrInvalidArgument naming it. A box with other
// capabilities than the default boots (no template, no warm pool).
// Capabilities beyond the default (SYS_ADMIN, MKNOD, NET_ADMIN, ...) let box
// processes reach the guest agent's side of the VM: the VM stays the wall.
func WithCapabilities(c Capabilities) BoxOption {
	return func(cfg *BoxConfig) error {
		if _, err := protocol.CapMask(protocol.DefaultCaps, c.Add, c.Drop); err != nil {
			return err
		}
		c.Add, c.Drop = append([]string(nil), c.Add...), append([]string(nil), c.Drop...)
		cfg.Capabilities = &c
		return nil
	}
}

// WithSecurity sets the box's isolation (default SecurityStandard()).
func WithSecurity(s SecurityOptions) BoxOption {
	return func(cfg *BoxConfig) error {
		if err := s.check(); err != nil {
			return err
		}
		cfg.Security = &s
		return nil
	}
}

func (s SecurityOptions) check() error {
	if !s.NetworkEnabled {
		return errdefs.Errorf(errdefs.ErrUnsupported, "security: network_enabled=false is BoxLite's macOS-only setting: use network mode \"disabled\"")
	}
	for _, l := range s.rlimits() {
		if l.Hard == 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "security: %s of 0 would let no process run: leave it unset for no limit", l.Type)
		}
	}
	return nil
}

// rlimits are the limits s puts on every box process.
func (s SecurityOptions) rlimits() []Rlimit {
	var out []Rlimit
	for _, l := range []struct {
		typ string
		v   *uint64
	}{{"RLIMIT_NOFILE", s.MaxOpenFiles}, {"RLIMIT_FSIZE", s.MaxFileSize}, {"RLIMIT_NPROC", s.MaxProcesses},
		{"RLIMIT_AS", s.MaxMemory}, {"RLIMIT_CPU", s.MaxCPUTime}} {
		if l.v != nil {
			out = append(out, Rlimit{Type: l.typ, Soft: *l.v, Hard: *l.v})
		}
	}
	return out
}

// security is the box's, the default filled in.
func (c *BoxConfig) security() SecurityOptions {
	if c.Security == nil {
		return SecurityStandard()
	}
	return *c.Security
}

// sandboxPolicy is what the guest's sandbox applies to the box's processes;
// nil: the default.
func (c *BoxConfig) sandboxPolicy() (*protocol.SandboxPolicy, error) {
	sec := c.security()
	if c.Capabilities == nil && sec.SeccompEnabled {
		return nil, nil
	}
	p := protocol.SandboxPolicy{Caps: protocol.DefaultCaps, NoSeccomp: !sec.SeccompEnabled}
	if c.Capabilities != nil {
		m, err := protocol.CapMask(protocol.DefaultCaps, c.Capabilities.Add, c.Capabilities.Drop)
		if err != nil {
			return nil, err
		}
		p.Caps = m
	}
	if p.Caps == protocol.DefaultCaps && !p.NoSeccomp {
		return nil, nil
	}
	return &p, nil
}

// boxRlimits adds the box's security limits to req for the types it does
// not set itself.
func (c *BoxConfig) boxRlimits(req *protocol.Exec) {
	for _, l := range c.security().rlimits() {
		set := false
		for _, r := range req.Rlimits {
			set = set || r.Type == l.Type
		}
		if !set {
			req.Rlimits = append(req.Rlimits, protocol.Rlimit{Type: l.Type, Soft: l.Soft, Hard: l.Hard})
		}
	}
}
