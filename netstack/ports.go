package netstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/protocol"
)

// Publish binds the box's published ports on the host (before the box
// boots, so that a port in use fails the start at once) and returns them as
// bound, with the listening sockets as files to hand to New, in the same
// order. A port in use is an ErrAlreadyExists naming it.
func Publish(ports []protocol.Port) (bound []protocol.Port, files []*os.File, err error) {
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			files = nil
		}
	}()
	for _, p := range ports {
		if p.HostIP == "" {
			p.HostIP = "127.0.0.1"
		}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		addr := net.JoinHostPort(p.HostIP, strconv.Itoa(p.HostPort))
		var f *os.File
		switch p.Protocol {
		case "udp":
			pc, err := net.ListenPacket("udp4", addr)
			if err != nil {
				return nil, files, portError(p, err)
			}
			p.HostPort = pc.LocalAddr().(*net.UDPAddr).Port
			f, err = pc.(*net.UDPConn).File()
			pc.Close()
			if err != nil {
				return nil, files, err
			}
		default:
			ln, err := net.Listen("tcp4", addr)
			if err != nil {
				return nil, files, portError(p, err)
			}
			p.HostPort = ln.Addr().(*net.TCPAddr).Port
			f, err = ln.(*net.TCPListener).File()
			ln.Close()
			if err != nil {
				return nil, files, err
			}
		}
		bound, files = append(bound, p), append(files, f)
	}
	return bound, files, nil
}

// listen turns the files of Publish back into listeners.
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

func portError(p protocol.Port, err error) error {
	what := fmt.Sprintf("host port %s:%d/%s", p.HostIP, p.HostPort, p.Protocol)
	if p.HostIP == "" {
		what = fmt.Sprintf("host port %d/%s", p.HostPort, p.Protocol)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "publish %s: already in use", what)
	}
	if errors.Is(err, syscall.EACCES) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "publish %s: permission denied (ports below 1024 need privileges)", what)
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "publish %s: %v", what, err)
}

// servePort forwards the i'th published port into the box.
func (n *Stack) servePort(i int) {
	p := n.ports[i]
	guest := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(GuestIP.As4()), Port: uint16(p.GuestPort)}
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

// Registry records which host ports boxes publish, one file each under a
// directory shared by the home's shims, flock'ed by the shim that holds it
// (so a killed shim's ports free themselves). A nil *Registry records
// nothing.
type Registry struct {
	dir  string
	mu   sync.Mutex
	held map[string]*os.File
}

// NewRegistry keeps the registry in dir.
func NewRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Registry{dir: dir, held: map[string]*os.File{}}, nil
}

func portFile(proto string, port int) string { return proto + "-" + strconv.Itoa(port) }

// Hold records ports as this process's.
func (r *Registry) Hold(ports []protocol.Port) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ports {
		name := portFile(p.Protocol, p.HostPort)
		f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("port registry: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			f.Close()
			return fmt.Errorf("port registry %s: %w", name, err)
		}
		r.held[name] = f
	}
	return nil
}

// Release forgets ports held by this process.
func (r *Registry) Release(ports []protocol.Port) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ports {
		name := portFile(p.Protocol, p.HostPort)
		if f := r.held[name]; f != nil {
			os.Remove(f.Name())
			f.Close()
			delete(r.held, name)
		}
	}
}

// Published reports whether a live box publishes port (over proto) on
// this host.
func (r *Registry) Published(proto string, port uint16) bool {
	if r == nil {
		return false
	}
	name := portFile(proto, int(port))
	r.mu.Lock()
	_, mine := r.held[name]
	r.mu.Unlock()
	if mine {
		return true
	}
	f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	// Held by a live shim: an exclusive lock is refused.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
