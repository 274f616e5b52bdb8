package netstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/boxlite/boxlite/internal/boxnet"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// listen turns the files of boxnet.Publish back into listeners.
func (n *Stack) listen() error {
	if len(n.cfg.Listeners) != len(n.cfg.Ports) {
		return fmt.Errorf("network: %d listeners for %d ports", len(n.cfg.Listeners), len(n.cfg.Ports))
	}
	for i, f := range n.cfg.Listeners {
		var l io.Closer
		var err error
		if n.cfg.Ports[i].Protocol == "udp" {
			l, err = net.FilePacketConn(f)
		} else {
			l, err = net.FileListener(f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("network: port %d: %w", n.cfg.Ports[i].HostPort, err)
		}
		n.listeners = append(n.listeners, l)
	}
	n.ports = n.cfg.Ports
	return nil
}

// servePort forwards the i'th published port into the box.
func (n *Stack) servePort(i int) {
	p := n.ports[i]
	guest := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(boxnet.GuestIP.As4()), Port: uint16(p.GuestPort)}
	switch l := n.listeners[i].(type) {
	case net.Listener:
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go n.inbound(c, guest)
			}
		}()
	case net.PacketConn:
		go n.inboundUDP(l, guest)
	}
}

// inboundUDP carries datagrams from host clients of a published UDP port
// into the box, each client over a flow of its own (so replies find it),
// at most MaxUDPFlows at once; a flow idle for udpIdle ends.
func (n *Stack) inboundUDP(l net.PacketConn, guest tcpip.FullAddress) {
	var mu sync.Mutex
	flows := map[string]net.Conn{}
	buf := make([]byte, 65535)
	for {
		k, from, err := l.ReadFrom(buf)
		if err != nil {
			return
		}
		key := from.String()
		mu.Lock()
		c := flows[key]
		if c == nil && len(flows) < MaxUDPFlows {
			if gc, err := gonet.DialUDP(n.stack, nil, &guest, ipv4.ProtocolNumber); err == nil && n.track(gc) {
				c, flows[key] = gc, gc
				go func() {
					defer func() {
						mu.Lock()
						delete(flows, key)
						mu.Unlock()
						n.untrack(gc)
					}()
					reply := make([]byte, 65535)
					for {
						gc.SetReadDeadline(time.Now().Add(udpIdle))
						r, err := gc.Read(reply)
						if err != nil {
							return
						}
						l.WriteTo(reply[:r], from)
					}
				}()
			}
		}
		mu.Unlock()
		if c != nil {
			c.Write(buf[:k])
		}
	}
}

// inbound carries one host connection to a published TCP port into the box.
func (n *Stack) inbound(c net.Conn, guest tcpip.FullAddress) {
	if !n.track(c) {
		return
	}
	defer n.untrack(c)
	ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
	in, err := gonet.DialContextTCP(ctx, n.stack, guest, ipv4.ProtocolNumber)
	cancel()
	if err != nil {
		return
	}
	if !n.track(in) {
		return
	}
	defer n.untrack(in)
	splice(c, in)
}
