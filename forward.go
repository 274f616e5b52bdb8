package boxlite

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// SocketAddress is where a TunnelForwarder listens: TCP on a numeric IP
// (port 0 picks a free one) or a Unix socket at an absolute path, as
// BoxLite's SocketAddress.tcp(host, port) and SocketAddress.unix(path).
type SocketAddress struct {
	Network string // "tcp" or "unix"
	Host    string // tcp: a numeric IPv4 or IPv6 address; default 127.0.0.1
	Port    int    // tcp: 0 to 65535
	Path    string // unix: an absolute path
}

// TCPAddress is a TCP SocketAddress.
func TCPAddress(host string, port int) SocketAddress {
	return SocketAddress{Network: "tcp", Host: host, Port: port}
}

// UnixAddress is a Unix socket SocketAddress.
func UnixAddress(path string) SocketAddress { return SocketAddress{Network: "unix", Path: path} }

func (a SocketAddress) String() string {
	if a.Network == "unix" {
		return "unix:" + a.Path
	}
	return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}

// Check reports what is wrong with a as ErrInvalidArgument, and fills in
// the default host.
func (a *SocketAddress) Check() error {
	switch a.Network {
	case "tcp":
		if a.Host == "" {
			a.Host = "127.0.0.1"
		}
		if _, err := netip.ParseAddr(a.Host); err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel listener host %q must be a numeric IP", a.Host)
		}
		if a.Port < 0 || a.Port > protocol.MaxPort {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel listener port %d: want 0 to %d", a.Port, protocol.MaxPort)
		}
		if a.Path != "" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel listener: a tcp address has no path")
		}
	case "unix":
		if !filepath.IsAbs(a.Path) {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel Unix socket path %q must be absolute", a.Path)
		}
		if a.Host != "" || a.Port != 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel listener: a unix address has no host or port")
		}
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel listener type %q: want tcp or unix", a.Network)
	}
	return nil
}

// MaxForwardedConns caps the connections one TunnelForwarder carries at
// once; further clients wait in the listen queue.
const MaxForwardedConns = 256

// TunnelForwarder listens on a host address and carries every connection
// it accepts to a port in the box, each over a tunnel of its own
// (Box.ForwardTunnel). A connection whose tunnel fails (nothing listens
// in the box) is closed; the forwarder goes on.
type TunnelForwarder struct {
	dial  func(context.Context) (TunnelStream, error)
	ln    net.Listener
	addr  SocketAddress
	slots chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]TunnelStream
	closed bool
	err    error // why accepting stopped, when not Close
	wg     sync.WaitGroup
	done   chan struct{}
}

// ForwardTunnel listens on listen and forwards each connection to port in
// the box (1-65535) until Close. A Unix socket's file is created (an
// existing one is ErrAlreadyExists) and removed by Close.
func (b *Box) ForwardTunnel(ctx context.Context, port int, listen SocketAddress) (*TunnelForwarder, error) {
	if port < 1 || port > protocol.MaxPort {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: port %d: want 1 to %d", port, protocol.MaxPort)
	}
	if err := listen.Check(); err != nil {
		return nil, err
	}
	// The box must run and have tunnels before anything listens.
	_, info, err := b.running(ctx, "tunnel forward")
	if err != nil {
		return nil, err
	}
	if !info.Hello.Has(protocol.FeatureTunnel) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "tunnel: box %s runs an agent without tunnels (%s); restart the box to update it", b.rec.ID, info.Hello.Agent)
	}
	return NewTunnelForwarder(listen, func(ctx context.Context) (TunnelStream, error) {
		ctx, cancel := context.WithTimeout(ctx, protocol.TunnelDialTimeout+hostMargin)
		defer cancel()
		return b.DialTunnel(ctx, port)
	})
}

// TunnelStream is a byte stream to a port in a box with half-close: a
// TunnelConn, or a REST runtime's tunnel.
type TunnelStream interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// NewTunnelForwarder listens on listen and carries each connection it
// accepts over a stream dial opens (Box.ForwardTunnel's forwarder, for
// streams from elsewhere: a REST runtime's tunnels).
func NewTunnelForwarder(listen SocketAddress, dial func(context.Context) (TunnelStream, error)) (*TunnelForwarder, error) {
	if err := listen.Check(); err != nil {
		return nil, err
	}
	var ln net.Listener
	var err error
	if listen.Network == "unix" {
		if _, err := os.Lstat(listen.Path); err == nil {
			return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "tunnel listener %s: the file exists", listen.Path)
		}
		ln, err = net.Listen("unix", listen.Path)
	} else {
		ln, err = net.Listen("tcp", listen.String())
	}
	if err != nil {
		kind := errdefs.ErrInvalidArgument
		if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.EADDRINUSE) {
			kind = errdefs.ErrAlreadyExists
		}
		return nil, errdefs.Errorf(kind, "tunnel listener %s: %v", listen, err)
	}
	if u, ok := ln.(*net.UnixListener); ok {
		u.SetUnlinkOnClose(true)
	}
	addr := listen
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		addr.Port = a.Port
	}
	f := &TunnelForwarder{dial: dial, ln: ln, addr: addr, slots: make(chan struct{}, MaxForwardedConns),
		conns: map[net.Conn]TunnelStream{}, done: make(chan struct{})}
	go f.serve()
	return f, nil
}

// LocalAddr is the address the forwarder listens on (a TCP port 0
// resolved to the one picked).
func (f *TunnelForwarder) LocalAddr() SocketAddress { return f.addr }

func (f *TunnelForwarder) serve() {
	defer close(f.done)
	for {
		f.slots <- struct{}{}
		c, err := f.ln.Accept()
		if err != nil {
			<-f.slots
			f.mu.Lock()
			if !f.closed {
				f.err = errdefs.Errorf(errdefs.ErrInternal, "tunnel forwarder %s: accept: %v", f.addr, err)
			}
			f.mu.Unlock()
			f.wg.Wait()
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			<-f.slots
			continue
		}
		f.conns[c] = nil
		f.wg.Add(1)
		f.mu.Unlock()
		go f.carry(c)
	}
}

// carry moves one client's connection to and from a tunnel of its own,
// passing each side's half-close on.
func (f *TunnelForwarder) carry(c net.Conn) {
	defer func() {
		c.Close()
		f.mu.Lock()
		t := f.conns[c]
		delete(f.conns, c)
		f.mu.Unlock()
		if t != nil {
			t.Close()
		}
		<-f.slots
		f.wg.Done()
	}()
	t, err := f.dial(context.Background())
	if err != nil {
		log.Printf("boxlite: tunnel forwarder %s: %v", f.addr, err)
		return
	}
	f.mu.Lock()
	closed := f.closed
	if !closed {
		f.conns[c] = t
	}
	f.mu.Unlock()
	if closed {
		t.Close()
		return
	}
	carry(c, nil, t)
}

// Done is closed once the forwarder has stopped and its connections ended.
func (f *TunnelForwarder) Done() <-chan struct{} { return f.done }

// Wait blocks until the forwarder has stopped (Close, or its listener
// failed: then the error) and its connections have ended, or ctx ends.
func (f *TunnelForwarder) Wait(ctx context.Context) error {
	select {
	case <-f.done:
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "wait for tunnel forwarder %s: %v", f.addr, ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Close stops listening (removing a Unix socket's file) and ends the
// connections it carries.
func (f *TunnelForwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	var open []io.Closer
	for c, t := range f.conns {
		open = append(open, c)
		if t != nil {
			open = append(open, t)
		}
	}
	f.mu.Unlock()
	err := f.ln.Close()
	for _, c := range open {
		c.Close()
	}
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
