package netstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"

	"github.com/boxlite/boxlite/internal/netstack/tap"
	"github.com/containers/gvisor-tap-vsock/pkg/types"
	"github.com/sirupsen/logrus"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Bounds on what one box may hold in its shim: a guest opening connections
// without end meets these, not the shim's descriptor or memory limits.
const (
	MaxTCPConns   = 256 // NATed TCP connections open at once
	MaxUDPFlows   = 256 // NATed UDP flows open at once
	maxHandshakes = 64  // TCP connections being set up at once
	dialTimeout   = 10 * time.Second
	udpIdle       = 90 * time.Second // a UDP flow with no traffic this long ends
	// tcpBuffer bounds each guest connection's buffers in the stack (the
	// default lets one grow to 4 MiB each way).
	tcpBuffer = 1 << 20
	// maxLoggedDests: blocked destinations are logged once each, up to this many.
	maxLoggedDests = 256
)

// Config is one box's network.
type Config struct {
	// Policy limits where the box may connect (nil: anywhere).
	Policy *netpolicy.Policy
	// Ports are the published ports as boxnet.Publish bound them, and Listeners
	// their sockets (New takes them over).
	Ports     []protocol.Port
	Listeners []*os.File
	// Published, when set, tells whether a box on this host publishes a
	// port (boxnet.Registry.Published, or a question to whoever holds it), so that
	// no box reaches another's (or its own) through the host.
	Published func(proto string, port uint16) bool
	// Logf logs what the stack does for the box's log (rate-limited here).
	Logf func(format string, args ...any)
	// Lookup resolves a name's IPv4 addresses for the box's DNS; nil is
	// the host's resolver (tests stand in for it).
	Lookup func(ctx context.Context, name string) ([]netip.Addr, error)
	// Secrets, when set, are put into the box's HTTPS requests to their
	// hosts (intercept.go).
	Secrets *Secrets
}

// Stack is a box's network. New binds its published ports, Serve carries
// the VMM's frames, Close releases everything.
type Stack struct {
	cfg       Config
	stack     *stack.Stack
	sw        *tap.Switch
	ports     []protocol.Port
	listeners []io.Closer // of the published ports, in order
	closers   []io.Closer // the DNS server's
	ctx       context.Context
	cancel    context.CancelFunc

	mu     sync.Mutex
	conns  map[io.Closer]struct{} // host and guest ends of live NATed connections
	logged map[string]struct{}
	// serving counts the Serve calls still running: Close waits for them
	// before it closes the gVisor stack, which must not be handed a frame
	// after (it panics on a removed NIC's endpoints).
	serving sync.WaitGroup

	// policy is where the box may connect now: cfg.Policy until SetPolicy
	// replaces it (nil: anywhere).
	policy atomic.Pointer[netpolicy.Policy]

	tcpConns, udpFlows atomic.Int64
	lookups            chan struct{} // DNS lookups in flight on the host's resolver
	secrets            *secretState  // nil without secrets
	stats              statCounters
}

// Stats counts what the box's network did.
type Stats = protocol.NetworkStats

type statCounters struct {
	tcp, udp, dns, blocked, dropped atomic.Uint64
	tcpErrors                       atomic.Uint64 // connections the host could not open
}

// New builds the box's stack over its published ports' listeners.
func New(cfg Config) (*Stack, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Lookup == nil {
		cfg.Lookup = func(ctx context.Context, name string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip4", name)
		}
	}
	// gvisor-tap-vsock logs through logrus, at times about what the guest
	// sends: the shim logs for itself, rate-limited.
	logrus.SetOutput(io.Discard)

	ctx, cancel := context.WithCancel(context.Background())
	n := &Stack{cfg: cfg, ctx: ctx, cancel: cancel, conns: map[io.Closer]struct{}{}, logged: map[string]struct{}{},
		lookups: make(chan struct{}, maxLookups)}
	if cfg.Secrets != nil {
		n.secrets = newSecretState(cfg.Secrets)
	}
	n.policy.Store(cfg.Policy)
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	if err := n.listen(); err != nil {
		return nil, err
	}
	link, err := tap.NewLinkEndpoint(false, boxnet.MTU, boxnet.GatewayMAC, boxnet.GatewayIP.String(), []string{boxnet.HostIP.String()})
	if err != nil {
		return nil, fmt.Errorf("network: link: %w", err)
	}
	n.sw = tap.NewSwitch(false)
	link.Connect(n.sw)
	n.sw.Connect(link)
	n.stack = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4},
	})
	if terr := n.stack.CreateNIC(1, link); terr != nil {
		return nil, fmt.Errorf("network: nic: %s", terr)
	}
	for _, a := range []netip.Addr{boxnet.GatewayIP, boxnet.HostIP} {
		if terr := n.stack.AddProtocolAddress(1, tcpip.ProtocolAddress{
			Protocol:          ipv4.ProtocolNumber,
			AddressWithPrefix: tcpip.AddrFrom4(a.As4()).WithPrefix(),
		}, stack.AddressProperties{}); terr != nil {
			return nil, fmt.Errorf("network: address %s: %s", a, terr)
		}
	}
	// Spoofing and promiscuous mode let the stack answer for every address
	// the guest sends to: that is how its connections are NATed.
	n.stack.SetSpoofing(1, true)
	n.stack.SetPromiscuousMode(1, true)
	sub, _ := tcpip.NewSubnet(tcpip.AddrFrom4(boxnet.Subnet.Addr().As4()), tcpip.MaskFromBytes(net.CIDRMask(boxnet.Subnet.Bits(), 32)))
	n.stack.SetRouteTable([]tcpip.Route{{Destination: sub, NIC: 1}})
	bufs := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 128 << 10, Max: tcpBuffer}
	n.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &bufs)
	sbufs := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 128 << 10, Max: tcpBuffer}
	n.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &sbufs)
	sack := tcpip.TCPSACKEnabled(true)
	n.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)

	n.stack.SetTransportProtocolHandler(tcp.ProtocolNumber, tcp.NewForwarder(n.stack, 0, maxHandshakes, n.forwardTCP).HandlePacket)
	n.stack.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(n.stack, n.forwardUDP).HandlePacket)
	if err := n.serveDNS(); err != nil {
		return nil, err
	}
	for i := range n.ports {
		n.servePort(i)
	}
	ok = true
	return n, nil
}

// Ports returns the published ports as bound (host ports picked).
func (n *Stack) Ports() []protocol.Port { return append([]protocol.Port(nil), n.ports...) }

// Serve carries Ethernet frames between the stack and the VMM over conn, a
// SOCK_SEQPACKET socket (one frame per message, so a frame's size is bounded
// by the read, never by a length the guest sends). It returns when conn fails
// or the stack is closed.
func (n *Stack) Serve(conn net.Conn) error {
	if !n.trackAs(conn, true) {
		return net.ErrClosed
	}
	defer n.serving.Done()
	defer n.untrack(conn)
	return n.sw.Accept(n.ctx, guestFrames{conn, &n.stats.dropped}, types.BessProtocol)
}

// guestFrames passes on only the frames the box's NIC may send: from its own
// MAC address. The switch learns every source address it sees, so a guest
// inventing addresses would grow its table without end.
type guestFrames struct {
	net.Conn
	dropped *atomic.Uint64
}

var guestMAC = func() net.HardwareAddr { m, _ := net.ParseMAC(boxnet.GuestMAC); return m }()

func (g guestFrames) Read(p []byte) (int, error) {
	for {
		k, err := g.Conn.Read(p)
		if err != nil || (k >= 14 && bytes.Equal(p[6:12], guestMAC)) {
			return k, err
		}
		g.dropped.Add(1)
	}
}

// Stats returns the box network's counters so far.
// SetPolicy replaces where the box may connect (nil: anywhere) for
// connections, flows and names from now on; open ones are kept.
func (n *Stack) SetPolicy(p *netpolicy.Policy) { n.policy.Store(p) }

// pol is the policy now.
func (n *Stack) pol() *netpolicy.Policy { return n.policy.Load() }

func (n *Stack) Stats() Stats {
	s := Stats{TCPConns: n.stats.tcp.Load(), TCPErrors: n.stats.tcpErrors.Load(), UDPFlows: n.stats.udp.Load(), DNSQueries: n.stats.dns.Load(),
		Blocked: n.stats.blocked.Load(), Dropped: n.stats.dropped.Load()}
	if n.sw != nil {
		s.BytesToGuest, s.BytesFromGuest = atomic.LoadUint64(&n.sw.Sent), atomic.LoadUint64(&n.sw.Received)
	}
	return s
}

// Close ends every connection, unpublishes the ports and stops the stack.
func (n *Stack) Close() {
	n.cancel()
	for _, c := range append(n.listeners, n.closers...) {
		c.Close()
	}
	n.mu.Lock()
	conns := n.conns
	n.conns = map[io.Closer]struct{}{}
	n.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	// A closed NIC connection ends its Serve's read; the frame it may be
	// handing to the stack is delivered first.
	n.serving.Wait()
	if n.stack != nil {
		n.stack.Close()
	}
}

func (n *Stack) track(c io.Closer) bool { return n.trackAs(c, false) }

// trackAs tracks c; for a NIC connection (serve) it also counts its Serve
// in the same critical section, so Close either waits for it or refuses it.
func (n *Stack) trackAs(c io.Closer, serve bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		c.Close()
		return false
	}
	n.conns[c] = struct{}{}
	if serve {
		n.serving.Add(1)
	}
	return true
}

func (n *Stack) untrack(c io.Closer) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.Close()
}

// logOnce logs what happened to a destination the first time only.
func (n *Stack) logOnce(key, format string, args ...any) {
	n.mu.Lock()
	_, seen := n.logged[key]
	if !seen && len(n.logged) < maxLoggedDests {
		n.logged[key] = struct{}{}
	}
	n.mu.Unlock()
	if !seen {
		n.cfg.Logf(format, args...)
	}
}

// splice copies both ways between a and b until both directions end,
// passing half-closes on.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
