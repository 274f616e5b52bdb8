package boxlite

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A tunnel is a TCP connection to a port on the box's own loopback
// (127.0.0.1 in the box), carried over the box's agent channel as a stream
// of its own: it needs no published port and no network in the box (a box
// with NetworkDisabled serves one), and the box's allow_net does not apply
// (the connection starts in the box). Each direction is flow-controlled
// like an exec's output, so a reader that stops reading holds the box's
// sender back, and each side's half-close reaches the other. A tunnel that
// fails (nothing listens, the box's server resets it) fails alone; a box
// whose agent breaks the protocol on one is stopped, as for any stream.

// TunnelConn is a connection to a port in the box (Box.DialTunnel). Read
// returns io.EOF once the box's side has sent its last byte (it closed or
// half-closed the connection); CloseWrite half-closes the host's side.
// Deadlines are not supported (the Set*Deadline methods return
// ErrUnsupported): close the connection to stop a blocked Read or Write.
type TunnelConn struct {
	c    *conn
	id   uint32
	port int
	box  string

	recv *window     // the box's bytes
	send *sendWindow // window for the host's bytes

	started chan struct{} // closed at TStarted or the stream's end
	wmu     sync.Mutex    // orders writes and the half-close
	wclosed bool

	once sync.Once
	done chan struct{}
	err  error // why the stream ended; nil: both sides closed cleanly
}

func (t *TunnelConn) bind(id uint32) { t.id = id }

func (t *TunnelConn) what() string { return fmt.Sprintf("tunnel to port %d of box %s", t.port, t.box) }

func (t *TunnelConn) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStarted:
		t.markStarted()
	case protocol.TStdout:
		if err := t.recv.push(f.Payload); err != nil {
			t.c.violation(fmt.Errorf("%s: %w", t.what(), err))
		}
	case protocol.TEOF:
		t.recv.close(io.EOF)
	case protocol.TCredit:
		var c protocol.Credit
		err := protocol.Decode(f, &c)
		if err == nil && c.Fd != 0 {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "credit for fd %d: only the host's side (0) takes credit", c.Fd)
		}
		if err == nil {
			err = t.send.give(c.Bytes)
		}
		if err != nil {
			t.c.violation(fmt.Errorf("%s: %w", t.what(), err))
		}
	case protocol.TExit:
		t.finish(nil)
	case protocol.TError:
		var pe protocol.Error
		err := protocol.Decode(f, &pe)
		if err == nil {
			err = pe.Err()
		}
		t.finish(err)
	}
}

func (t *TunnelConn) markStarted() {
	select {
	case <-t.started:
	default:
		close(t.started)
	}
}

func (t *TunnelConn) fail(err error) { t.finish(fmt.Errorf("%s: %w", t.what(), err)) }

// finish ends the stream: what the box sent stays readable, then Read
// returns io.EOF (a clean end) or the error.
func (t *TunnelConn) finish(err error) {
	t.once.Do(func() {
		t.err = err
		end := err
		if end == nil {
			end = io.EOF
		}
		close(t.done)
		t.markStarted()
		t.recv.close(end)
		if err == nil {
			err = errdefs.Errorf(errdefs.ErrClosed, "%s: the connection has ended", t.what())
		}
		t.send.close(err)
	})
}

// DialTunnel connects to TCP port (1-65535) on the box's loopback, starting
// a configured or stopped box first, as Exec does. Nothing listening there
// is ErrUnreachable; an agent without tunnels is ErrUnsupported. ctx bounds
// the connecting only.
func (b *Box) DialTunnel(ctx context.Context, port int) (*TunnelConn, error) {
	if port < 1 || port > protocol.MaxPort {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: port %d: want 1 to %d", port, protocol.MaxPort)
	}
	c, info, err := b.running(ctx, "tunnel")
	if err != nil {
		return nil, err
	}
	if !info.Hello.Has(protocol.FeatureTunnel) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "tunnel: box %s runs an agent without tunnels (%s); restart the box to update it", b.rec.ID, info.Hello.Agent)
	}
	t := &TunnelConn{c: c, port: port, box: b.rec.ID, send: newSendWindow(protocol.InitialWindow),
		started: make(chan struct{}), done: make(chan struct{})}
	t.recv = newWindow(func(n int) {
		_ = c.send(protocol.TCredit, t.id, protocol.Credit{Fd: 1, Bytes: n})
	})
	if _, err := c.open(t, protocol.TTunnel, protocol.Tunnel{Port: port}); err != nil {
		return nil, fmt.Errorf("tunnel to port %d: %w", port, err)
	}
	// The agent answers within its dial timeout; the margin covers a
	// hostile agent that never does.
	timer := time.NewTimer(protocol.TunnelDialTimeout + hostMargin)
	defer timer.Stop()
	select {
	case <-t.started:
	case <-ctx.Done():
		t.Close()
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", t.what(), ctx.Err())
	case <-timer.C:
		t.Close()
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "%s: the box did not answer within %s", t.what(), protocol.TunnelDialTimeout+hostMargin)
	}
	select {
	case <-t.done:
		if t.err != nil {
			return nil, t.err
		}
	default:
	}
	return t, nil
}

// Read reads what the box's side sent.
func (t *TunnelConn) Read(p []byte) (int, error) { return t.recv.Read(p) }

// Write sends p to the box's side, blocking while the window is full.
func (t *TunnelConn) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.wclosed {
		return 0, errdefs.Errorf(errdefs.ErrClosed, "%s: write after CloseWrite", t.what())
	}
	done := 0
	for done < len(p) {
		n, err := t.send.take(min(len(p)-done, protocol.MaxChunk))
		if err != nil {
			return done, err
		}
		f := protocol.Frame{Type: protocol.TStdin, Stream: t.id, Payload: p[done : done+n]}
		if err := t.c.sendFrame(f); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// CloseWrite half-closes the connection: the box's side reads EOF, and can
// still send.
func (t *TunnelConn) CloseWrite() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.wclosed {
		return nil
	}
	t.wclosed = true
	select {
	case <-t.done:
		return nil
	default:
	}
	return t.c.send(protocol.TStdinClose, t.id, nil)
}

// Close ends the connection; one still open both ways is reset in the box.
func (t *TunnelConn) Close() error {
	select {
	case <-t.done:
		return nil
	default:
	}
	err := t.c.send(protocol.TCancel, t.id, nil)
	t.c.forget(t.id)
	t.finish(errdefs.Errorf(errdefs.ErrClosed, "%s: closed", t.what()))
	return err
}

// Done is closed when the stream has ended; Err then says how.
func (t *TunnelConn) Done() <-chan struct{} { return t.done }

// Err is why the stream ended: nil while it runs or after a clean end.
func (t *TunnelConn) Err() error {
	select {
	case <-t.done:
		return t.err
	default:
		return nil
	}
}

// Port is the port in the box.
func (t *TunnelConn) Port() int { return t.port }

// TunnelAddr is a tunnel's end as net.Addr: "boxlite-tunnel", "BOX:PORT".
type TunnelAddr struct {
	Box  string
	Port int
}

func (a TunnelAddr) Network() string { return "boxlite-tunnel" }
func (a TunnelAddr) String() string  { return fmt.Sprintf("%s:%d", a.Box, a.Port) }

func (t *TunnelConn) LocalAddr() net.Addr  { return TunnelAddr{Box: "host"} }
func (t *TunnelConn) RemoteAddr() net.Addr { return TunnelAddr{Box: t.box, Port: t.port} }

func (t *TunnelConn) SetDeadline(time.Time) error      { return t.noDeadlines() }
func (t *TunnelConn) SetReadDeadline(time.Time) error  { return t.noDeadlines() }
func (t *TunnelConn) SetWriteDeadline(time.Time) error { return t.noDeadlines() }

func (t *TunnelConn) noDeadlines() error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "%s: deadlines are not supported; close the connection instead", t.what())
}

var _ net.Conn = (*TunnelConn)(nil)

// Carry moves bytes between the client connection c and the tunnel until
// both ways have ended: from (c when nil: a reader holding what was read
// of c already, then c) to the box, the box's bytes to c; each side's end
// of data is passed on as a half-close, a failure as a close.
func (t *TunnelConn) Carry(c net.Conn, from io.Reader) { carry(c, from, t) }

func carry(c net.Conn, from io.Reader, t TunnelStream) {
	if from == nil {
		from = c
	}
	done := make(chan struct{})
	go func() { // client to box
		defer close(done)
		if _, err := io.Copy(t, from); err == nil {
			t.CloseWrite()
		} else {
			t.Close()
		}
	}()
	_, err := io.Copy(c, t) // box to client
	if cw, ok := c.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
	} else {
		c.Close()
	}
	<-done
}
