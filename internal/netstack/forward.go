package netstack

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// blockedNets are never reached through the NAT, whatever the policy: the
// host's loopback is reached by HostIP only; link-local holds cloud
// metadata services; the rest are not destinations.
var blockedNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// route decides where a box's connection to dst:port goes on the host, or
// why it goes nowhere.
func (n *Stack) route(proto string, dst netip.Addr, port uint16) (string, string) {
	switch {
	case dst == boxnet.HostIP:
		if !n.pol().AllowAddr(dst, port) {
			return "", "not in allow_net"
		}
		if n.published(proto, port) {
			return "", "a box's published port"
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), ""
	case boxnet.Subnet.Contains(dst):
		return "", "the box network has no such host"
	}
	for _, p := range blockedNets {
		if p.Contains(dst) {
			return "", "not routable from a box"
		}
	}
	if !n.pol().AllowAddr(dst, port) {
		return "", "not in allow_net"
	}
	if hostAddr(dst) && n.published(proto, port) {
		return "", "a box's published port"
	}
	return net.JoinHostPort(dst.String(), strconv.Itoa(int(port))), ""
}

func (n *Stack) published(proto string, port uint16) bool {
	return n.cfg.Published != nil && n.cfg.Published(proto, port)
}

func (n *Stack) refuse(proto string, dst netip.Addr, port uint16, why string) {
	n.stats.blocked.Add(1)
	n.logOnce(proto+" "+dst.String()+":"+strconv.Itoa(int(port)),
		"network: refused %s to %s:%d: %s", proto, dst, port, why)
}

func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip.Unmap()
}

// forwardTCP NATs one TCP connection of the box: the host side is dialed
// first, so a refused or unreachable destination resets the guest's SYN.
func (n *Stack) forwardTCP(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	target, why := n.route("tcp", dst, port)
	if why != "" {
		n.refuse("tcp", dst, port, why)
		r.Complete(true)
		return
	}
	if n.secrets.candidate(dst, port) {
		n.interceptTCP(r, dst, port, target)
		return
	}
	if n.tcpConns.Add(1) > MaxTCPConns {
		n.tcpConns.Add(-1)
		n.stats.dropped.Add(1)
		n.logOnce("tcp-limit", "network: more than %d TCP connections at once; refusing more", MaxTCPConns)
		r.Complete(true)
		return
	}
	defer n.tcpConns.Add(-1)
	d := net.Dialer{Timeout: dialTimeout}
	out, err := d.DialContext(n.ctx, "tcp", target)
	if err != nil {
		n.stats.tcpErrors.Add(1)
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	r.Complete(false)
	if terr != nil {
		out.Close()
		return
	}
	n.stats.tcp.Add(1)
	in := gonet.NewTCPConn(&wq, ep)
	if !n.track(in) || !n.track(out) {
		in.Close()
		out.Close()
		return
	}
	defer n.untrack(in)
	defer n.untrack(out)
	splice(in, out)
}

// forwardUDP NATs one UDP flow of the box (one guest address and port to
// one destination) through a host socket, until it idles for udpIdle. It
// runs on the stack's packet path, so it only sets up: the copying runs on
// goroutines of its own.
func (n *Stack) forwardUDP(r *udp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	target, why := n.route("udp", dst, port)
	if why != "" {
		n.refuse("udp", dst, port, why)
		return
	}
	if n.udpFlows.Add(1) > MaxUDPFlows {
		n.udpFlows.Add(-1)
		n.stats.dropped.Add(1)
		n.logOnce("udp-limit", "network: more than %d UDP flows at once; dropping new ones", MaxUDPFlows)
		return
	}
	out, err := net.Dial("udp", target)
	if err != nil {
		n.udpFlows.Add(-1)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		n.udpFlows.Add(-1)
		out.Close()
		return
	}
	n.stats.udp.Add(1)
	in := gonet.NewUDPConn(&wq, ep)
	if !n.track(in) || !n.track(out) {
		n.udpFlows.Add(-1)
		in.Close()
		out.Close()
		return
	}
	go func() {
		defer n.udpFlows.Add(-1)
		defer n.untrack(in)
		defer n.untrack(out)
		done := make(chan struct{}, 2)
		go func() { copyDatagrams(out, in); done <- struct{}{} }()
		go func() { copyDatagrams(in, out); done <- struct{}{} }()
		<-done // either way idle or closed ends the flow
	}()
}

// copyDatagrams copies datagrams from src to dst until src idles for
// udpIdle or either fails.
func copyDatagrams(dst, src net.Conn) {
	buf := make([]byte, 65535)
	for {
		src.SetReadDeadline(time.Now().Add(udpIdle))
		k, err := src.Read(buf)
		if err != nil {
			return
		}
		if _, err := dst.Write(buf[:k]); err != nil {
			return
		}
	}
}

// hostAddr reports whether a is one of this host's own addresses.
func hostAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unsure: treat as the host's
	}
	for _, ia := range addrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Unmap() == a {
			return true
		}
	}
	return false
}
