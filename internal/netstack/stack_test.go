package netstack

import (
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// guest is a second gVisor stack playing the box's kernel: it has the
// box's address and route, and its NIC is the other end of the socketpair
// the box network serves, as QEMU's would be.
func guest(t *testing.T, cfg Config) (*stack.Stack, *Stack) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	f := os.NewFile(uintptr(fds[0]), "nic")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	go n.Serve(conn)

	mac, _ := net.ParseMAC(boxnet.GuestMAC)
	link, err := fdbased.New(&fdbased.Options{FDs: []int{fds[1]}, MTU: boxnet.MTU, EthernetHeader: true, Address: tcpip.LinkAddress(mac)})
	if err != nil {
		t.Fatal(err)
	}
	g := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	// Destroy waits for the guest's link to stop: only then may its fd be
	// closed (a number reused by the next test would get its frames).
	t.Cleanup(func() { g.Destroy(); unix.Close(fds[1]) })
	if err := g.CreateNIC(1, link); err != nil {
		t.Fatal(err)
	}
	g.AddProtocolAddress(1, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddrFrom4(boxnet.GuestIP.As4()).WithPrefix()}, stack.AddressProperties{})
	g.SetRouteTable([]tcpip.Route{{Destination: header4Any(), Gateway: tcpip.AddrFrom4(boxnet.GatewayIP.As4()), NIC: 1}})
	return g, n
}

func header4Any() tcpip.Subnet {
	s, _ := tcpip.NewSubnet(tcpip.AddrFrom4([4]byte{}), tcpip.MaskFromBytes(make([]byte, 4)))
	return s
}

func dial(g *stack.Stack, ip [4]byte, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return gonet.DialContextTCP(ctx, g, tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(ip), Port: uint16(port)}, ipv4.ProtocolNumber)
}

func lookup(t *testing.T, g *stack.Stack, name string) *dns.Msg {
	t.Helper()
	c, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(boxnet.GatewayIP.As4()), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	co := &dns.Conn{Conn: c}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := co.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	r, err := co.ReadMsg()
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	return r
}

// hostServer answers "hi" on the host's loopback.
func hostServer(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestHostAliasAndPolicy(t *testing.T) {
	port := hostServer(t)
	hostIP := boxnet.HostIP.As4()

	open, n := guest(t, Config{})
	c, err := dial(open, hostIP, port)
	if err != nil {
		t.Fatalf("no policy: dial the host alias: %v", err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "hi" {
		t.Errorf("no policy: read %q from the host", b)
	}
	if r := lookup(t, open, netpolicy.HostAlias); len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), boxnet.HostIP.String()) {
		t.Errorf("host alias lookup: %v", r)
	}
	// Never reachable, whatever the policy: the host's loopback by its own
	// address, link-local metadata, another address of the box subnet.
	for _, ip := range [][4]byte{{127, 0, 0, 1}, {169, 254, 169, 254}, {192, 168, 127, 9}} {
		if c, err := dial(open, ip, port); err == nil {
			c.Close()
			t.Errorf("reached %v:%d", ip, port)
		}
	}
	// A port nobody listens on: the host's connect fails, counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if c, err := dial(open, hostIP, closed); err == nil {
		c.Close()
		t.Errorf("connected to the closed port %d", closed)
	}
	// (a guest stack may not even send to 127.0.0.1: at least the others.)
	if st := n.Stats(); st.TCPConns != 1 || st.TCPErrors != 1 || st.Blocked < 2 || st.DNSQueries != 1 {
		t.Errorf("stats %+v", st)
	}

	pol, _ := netpolicy.Parse([]string{"example.invalid"})
	shut, n2 := guest(t, Config{Policy: pol})
	if c, err := dial(shut, hostIP, port); err == nil {
		c.Close()
		t.Error("allow_net: reached the host alias")
	}
	if r := lookup(t, shut, netpolicy.HostAlias); r.Rcode != dns.RcodeNameError {
		t.Errorf("allow_net: host alias lookup %v, want NXDOMAIN", r)
	}
	if st := n2.Stats(); st.Blocked != 2 {
		t.Errorf("allow_net stats %+v", st)
	}

	pol, _ = netpolicy.Parse([]string{netpolicy.HostAlias + ":" + strconv.Itoa(port)})
	some, _ := guest(t, Config{Policy: pol})
	if c, err := dial(some, hostIP, port); err != nil {
		t.Errorf("allow_net with the alias and port: %v", err)
	} else {
		c.Close()
	}
	if c, err := dial(some, hostIP, port+1); err == nil {
		c.Close()
		t.Error("allow_net: reached the host alias on a port not listed")
	}
}

func TestPublishedPort(t *testing.T) {
	bound, files, err := boxnet.Publish([]protocol.Port{{GuestPort: 8080}})
	if err != nil {
		t.Fatal(err)
	}
	if bound[0].HostPort == 0 || bound[0].HostIP != "127.0.0.1" || bound[0].Protocol != "tcp" {
		t.Fatalf("bound %+v", bound)
	}
	if _, _, err := boxnet.Publish([]protocol.Port{{HostPort: bound[0].HostPort, GuestPort: 1}}); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Errorf("publishing a port in use: %v", err)
	}
	g, _ := guest(t, Config{Ports: bound, Listeners: files})
	ln, err := gonet.ListenTCP(g, tcpip.FullAddress{NIC: 1, Port: 8080}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("from the box"))
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(bound[0].HostPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "from the box" {
		t.Errorf("read %q through the published port", b)
	}
}

func TestFramesFromOtherMACsAreDropped(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	n, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	f := os.NewFile(uintptr(fds[0]), "nic")
	conn, _ := net.FileConn(f)
	f.Close()
	go n.Serve(conn)
	frame := make([]byte, 60)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06}) // ARP from a made-up MAC
	for i := 0; i < 3; i++ {
		unix.Write(fds[1], frame)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats().Dropped < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := n.Stats(); st.Dropped != 3 || st.BytesFromGuest != 0 {
		t.Errorf("stats %+v: want 3 frames dropped before the switch", st)
	}
}

// TestSetPolicy: a running stack takes a new outbound policy at once: the
// host alias is reachable, then not (deny all, then a list without it),
// then again.
func TestSetPolicy(t *testing.T) {
	port := hostServer(t)
	hostIP := boxnet.HostIP.As4()
	g, n := guest(t, Config{})
	reach := func() bool {
		c, err := dial(g, hostIP, port)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	if !reach() {
		t.Fatal("no policy: the host alias is unreachable")
	}
	n.SetPolicy(netpolicy.DenyAll())
	if reach() {
		t.Error("deny all: reached the host alias")
	}
	if r := lookup(t, g, netpolicy.HostAlias); r.Rcode != dns.RcodeNameError {
		t.Errorf("deny all: host alias lookup %v, want NXDOMAIN", r)
	}
	pol, _ := netpolicy.Parse([]string{"example.invalid"})
	n.SetPolicy(pol)
	if reach() {
		t.Error("a list without the alias: reached it")
	}
	pol, _ = netpolicy.Parse([]string{netpolicy.HostAlias})
	n.SetPolicy(pol)
	if !reach() {
		t.Error("a list with the alias: unreachable")
	}
	n.SetPolicy(nil)
	if !reach() {
		t.Error("no policy again: unreachable")
	}
}

// TestCloseWhileFramesArrive closes the stack while the guest sends on a
// connection: a frame being handed to the gVisor stack when Close ran once
// reached a stack already closed and panicked (CI, 1 run in some hundreds).
// Close now waits for every Serve to return first.
func TestCloseWhileFramesArrive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	chunk := make([]byte, 32<<10)
	for i := 0; i < 40; i++ {
		g, n := guest(t, Config{})
		c, err := dial(g, boxnet.HostIP.As4(), port)
		if err != nil {
			t.Fatal(err)
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A write waits for room a closed stack never gives.
				c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
				c.Write(chunk)
			}
		}()
		time.Sleep(time.Duration(i%8) * time.Millisecond)
		n.Close()
		close(stop)
		<-done
		c.Close()
	}
}
