package boxlite

import (
	"context"
	"fmt"
	"net/netip"
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
	return &shimapi.Network{AllowNet: netpolicy.WithGrants(c.Network.AllowNet, c.secretHosts()), Ports: c.Ports}
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
