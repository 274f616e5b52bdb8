package boxlite

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/boxlite/boxlite/errdefs"

	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Network modes.
const (
	NetworkEnabled  = "enabled"  // a NIC with user-mode NAT to the host's network (the default)
	NetworkDisabled = "disabled" // no NIC at all: only lo
)

// NetworkSpec is a box's network: its mode, and when enabled, where it may
// connect. AllowNet entries are host names ("pypi.org"), wildcards
// ("*.example.com"), IPv4 addresses or CIDRs, each optionally with ":port";
// empty allows everything. With a list, DNS answers NXDOMAIN for names not
// in it, and host.boxlite.internal (the host's 127.0.0.1) is reachable only
// when listed.
type NetworkSpec struct {
	Mode     string   `json:"mode,omitempty"` // "" means NetworkEnabled
	AllowNet []string `json:"allow_net,omitempty"`
	// Inbound is BoxLite's inbound mode, "enabled" ("" too) or "disabled":
	// whether the box's ports are reachable from the public side of a
	// BoxLite cloud. A local box has no public side (its tunnels and
	// published ports are this host's), so it is kept and reported,
	// nothing more; an inbound allow-list is refused, as BoxLite's is.
	Inbound string `json:"inbound,omitempty"`
	// OutboundOff is set by UpdateOutbound("disabled") on a box created
	// with a network: its NIC stays (a running box cannot lose it), and
	// its network stack lets nothing out.
	OutboundOff bool `json:"outbound_off,omitempty"`
	// NetNS, when set (root only), is a network namespace (a Kubernetes
	// pod's, as CNI set it up: a /var/run/netns file or /proc/PID/ns/net)
	// whose interface the box takes over instead of the user-mode
	// network: a tap device in that namespace, given to QEMU, whose
	// traffic and the interface's are redirected to each other (tc, as
	// Kata's TC redirect); the box gets the interface's MAC, address,
	// gateway and MTU. AllowNet and ports do not apply (the pod's network
	// is its own).
	NetNS string `json:"netns,omitempty"`
}

// OutboundMode is the box's outbound mode now: "disabled" without a NIC
// or with its outbound turned off, else "enabled".
func (n NetworkSpec) OutboundMode() string {
	if n.Mode == NetworkDisabled || n.OutboundOff {
		return NetworkDisabled
	}
	return NetworkEnabled
}

// InboundMode is the box's inbound mode: "enabled" unless set "disabled".
func (n NetworkSpec) InboundMode() string {
	if n.Inbound == NetworkDisabled {
		return NetworkDisabled
	}
	return NetworkEnabled
}

// Port publishes a box port on the host: HostIP:HostPort (HostIP default
// 127.0.0.1; HostPort 0 picks a free port, shown in box info) reaches
// GuestPort in the box over Protocol "tcp" (default) or "udp".
type Port = protocol.Port

// NetworkInfo is a running box's network as box info shows it.
type NetworkInfo = protocol.NetworkInfo

// MaxPorts bounds the ports one box publishes.
const MaxPorts = 64

// WithNetwork sets the box's network. Default: enabled, reaching anywhere.
func WithNetwork(spec NetworkSpec) BoxOption {
	return func(c *BoxConfig) error { c.Network = spec; return nil }
}

// WithPorts publishes box ports on the host. Default: none.
func WithPorts(ports ...Port) BoxOption {
	return func(c *BoxConfig) error { c.Ports = append(c.Ports, ports...); return nil }
}

// validateNetwork is BoxConfig.validate's part for the network: it fills in
// the defaults (mode, protocol, host address) too.
func (c *BoxConfig) validateNetwork(bad func(string, ...any) error) error {
	switch c.Network.Mode {
	case "":
		c.Network.Mode = NetworkEnabled
	case NetworkEnabled, NetworkDisabled:
	default:
		return bad("network mode %q is not %q or %q", c.Network.Mode, NetworkEnabled, NetworkDisabled)
	}
	if c.Network.Inbound != "" && c.Network.Inbound != NetworkEnabled && c.Network.Inbound != NetworkDisabled {
		return bad("inbound network mode %q is not %q or %q", c.Network.Inbound, NetworkEnabled, NetworkDisabled)
	}
	if c.Network.OutboundOff && len(c.Network.AllowNet) > 0 {
		return bad("allow_net needs the outbound network enabled")
	}
	if c.Network.NetNS != "" {
		switch {
		case c.Network.Mode != NetworkEnabled:
			return bad("a network namespace needs the network enabled")
		case !filepath.IsAbs(c.Network.NetNS) || filepath.Clean(c.Network.NetNS) != c.Network.NetNS || len(c.Network.NetNS) > 4096:
			return bad("network namespace %q is not an absolute clean path", c.Network.NetNS)
		case len(c.Network.AllowNet) > 0 || len(c.Ports) > 0 || c.Network.OutboundOff:
			return bad("allow_net, ports and outbound modes do not apply to a network namespace's box")
		}
	}
	if c.Network.Mode == NetworkDisabled {
		if len(c.Network.AllowNet) > 0 {
			return bad("allow_net needs a network, but the network is disabled")
		}
		if len(c.Ports) > 0 {
			return bad("ports need a network, but the network is disabled")
		}
	}
	if _, err := netpolicy.Parse(c.Network.AllowNet); err != nil {
		return bad("%v", err)
	}
	if len(c.Ports) > MaxPorts {
		return bad("%d ports, at most %d", len(c.Ports), MaxPorts)
	}
	seen := map[string]bool{}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		if p.HostIP == "" {
			p.HostIP = "127.0.0.1"
		}
		switch {
		case p.Protocol != "tcp" && p.Protocol != "udp":
			return bad("port %d: protocol %q is not tcp or udp", p.GuestPort, p.Protocol)
		case p.GuestPort < 1 || p.GuestPort > 65535:
			return bad("port: guest port %d is not 1..65535", p.GuestPort)
		case p.HostPort < 0 || p.HostPort > 65535:
			return bad("port: host port %d is not 0..65535 (0 picks a free one)", p.HostPort)
		}
		if a, err := netip.ParseAddr(p.HostIP); err != nil || !a.Is4() {
			return bad("port %d: host address %q is not an IPv4 address", p.GuestPort, p.HostIP)
		}
		key := p.Protocol + ":" + strconv.Itoa(p.HostPort)
		if p.HostPort != 0 && seen[key] {
			return bad("host port %d/%s is published twice", p.HostPort, p.Protocol)
		}
		seen[key] = true
	}
	return nil
}

// shimNetwork is the network the shim builds for c, nil for none.
func (c *BoxConfig) shimNetwork() *shimapi.Network {
	if c.Network.Mode == NetworkDisabled {
		return nil
	}
	// A secret's host is reachable on its port (as BoxLite's #1533).
	if c.Network.NetNS != "" {
		return &shimapi.Network{NetNS: c.Network.NetNS}
	}
	return &shimapi.Network{AllowNet: netpolicy.WithGrants(c.Network.AllowNet, c.secretHosts()), Deny: c.Network.OutboundOff, Ports: c.Ports}
}

// UpdateOutbound replaces where the box may connect (BoxLite's
// network.update_outbound): mode "enabled" with allowNet (empty: anywhere),
// or "disabled" (nothing). A running box's network stack enforces it for
// new connections, flows and DNS names at once (open connections are
// kept); the box keeps it across restarts. A box created without a
// network gains one at its next start, not while it runs
// (ErrUnsupported). Bad modes or entries are ErrInvalidArgument.
func (b *Box) UpdateOutbound(ctx context.Context, mode string, allowNet []string) error {
	if mode != NetworkEnabled && mode != NetworkDisabled {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "update outbound: mode %q is not %q or %q", mode, NetworkEnabled, NetworkDisabled)
	}
	if mode == NetworkDisabled && len(allowNet) > 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "update outbound: allow_net needs mode enabled")
	}
	if _, err := netpolicy.Parse(allowNet); err != nil {
		return fmt.Errorf("update outbound: %w", err)
	}
	b.mu.Lock()
	c, state, n := b.conn, b.state, b.rec.Config.Network
	b.mu.Unlock()
	n.AllowNet = append([]string(nil), allowNet...)
	switch {
	case mode == NetworkDisabled && n.Mode == NetworkDisabled:
	case mode == NetworkDisabled:
		n.OutboundOff = true
	case n.Mode == NetworkDisabled && state == StateRunning:
		return errdefs.Errorf(errdefs.ErrUnsupported, "update outbound: box %s runs without a network (created with mode disabled); it gains one at its next start, not while it runs", b.rec.ID)
	default:
		n.Mode, n.OutboundOff = NetworkEnabled, false
	}
	if state == StateRunning && c != nil && n.Mode == NetworkEnabled {
		var now protocol.NetPolicy
		err := c.requestWithin(ctx, protocol.TNetwork, protocol.NetPolicy{Outbound: mode, AllowNet: netpolicy.WithGrants(allowNet, b.rec.Config.secretHosts())}, &now, requestTimeout)
		if err != nil {
			return fmt.Errorf("update outbound: %w", err)
		}
	}
	return b.saveNetwork(n)
}

// UpdateInbound sets BoxLite's inbound mode (see NetworkSpec.Inbound); an
// allow-list is refused (ErrUnsupported), as BoxLite refuses one.
func (b *Box) UpdateInbound(ctx context.Context, mode string, allowNet []string) error {
	if mode != NetworkEnabled && mode != NetworkDisabled {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "update inbound: mode %q is not %q or %q", mode, NetworkEnabled, NetworkDisabled)
	}
	if len(allowNet) > 0 {
		return errdefs.Errorf(errdefs.ErrUnsupported, "update inbound: an inbound allow_net is not supported (inbound access follows its mode alone)")
	}
	n := b.config().Network
	n.Inbound = mode
	return b.saveNetwork(n)
}

// saveNetwork records the box's network in its record. The network is the
// record's one part that changes: it is written, and read (config), under
// b.mu.
func (b *Box) saveNetwork(n NetworkSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := b.rec
	rec.Config.Network = n
	if err := writeJSON(b.path("box.json"), rec); err != nil {
		return fmt.Errorf("update network: %w", err)
	}
	b.rec.Config.Network = n
	return nil
}

// config is a copy of the box's configuration, its network as updated.
func (b *Box) config() BoxConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rec.Config
}

// NetworkStats are a running box's network counters now: bytes each way,
// connections, DNS queries, and what allow_net refused. ErrNotFound when the
// box has no network.
func (b *Box) NetworkStats(ctx context.Context) (*protocol.NetworkStats, error) {
	b.mu.Lock()
	c, state := b.conn, b.state
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		if state == StateStopped {
			return nil, fmt.Errorf("network stats: %w", b.stoppedError())
		}
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "network stats: box %s is %s", b.rec.ID, state)
	}
	var info protocol.Info
	if err := c.request(protocol.TInfo, nil, &info); err != nil {
		return nil, fmt.Errorf("network stats: %w", err)
	}
	if info.Network == nil || info.Network.Stats == nil {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "network stats: box %s has no network", b.rec.ID)
	}
	return info.Network.Stats, nil
}
