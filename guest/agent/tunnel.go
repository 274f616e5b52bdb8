//go:build linux

package agent

import (
	"errors"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// maxTunnels caps the tunnels one connection may hold open at once.
const maxTunnels = 1024

// tunnelOp is one tunnel stream (protocol.TTunnel): a TCP connection the
// agent opened to a port on the box's loopback. What the box's side writes
// goes to the host as TStdout within the window the host credits; the
// host's TStdin is queued (at most a window) and written into the
// connection, each chunk credited back once written. The stream ends with
// TExit once both directions are done, TError when the connection failed,
// or nothing when the host cancels it.
type tunnelOp struct {
	s    *server
	id   uint32
	port int

	mu        sync.Mutex
	cond      *sync.Cond
	conn      *net.TCPConn // nil until connected
	win       int64        // bytes the host lets us send
	q         [][]byte     // host data not yet written
	qlen      int
	closed    bool // the host sent TStdinClose
	readDone  bool // the box's side reached EOF and TEOF went out
	writeDone bool // the host's side is closed and written (or the connection stopped taking data)
	ended     bool // the stream's end is decided; the goroutines stop
	// over is set, under s.wmu, once the last frame is written or the
	// host cancelled; nothing of the stream is written after it.
	over bool
}

func (s *server) lookupTunnel(id uint32) *tunnelOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tunnels[id]
}

func (s *server) startTunnel(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel on stream 0: tunnels need a stream id of their own"))
		return
	}
	var req protocol.Tunnel
	if err := protocol.Decode(f, &req); err != nil {
		s.failStream(id, err)
		return
	}
	if req.Port < 1 || req.Port > protocol.MaxPort {
		s.sendError(id, errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: port %d: want 1 to %d", req.Port, protocol.MaxPort))
		return
	}
	t := &tunnelOp{s: s, id: id, port: req.Port, win: protocol.InitialWindow}
	t.cond = sync.NewCond(&t.mu)
	s.mu.Lock()
	inUse := s.execs[id] != nil || s.copies[id] != nil || s.tunnels[id] != nil
	n := len(s.tunnels)
	if !inUse && n < maxTunnels {
		s.tunnels[id] = t
	}
	s.mu.Unlock()
	switch {
	case inUse:
		s.failStream(id, errdefs.Errorf(errdefs.ErrAlreadyExists, "tunnel on stream %d: the stream is in use", id))
		return
	case n >= maxTunnels:
		s.sendError(id, errdefs.Errorf(errdefs.ErrLimit, "tunnel: %d tunnels are open, the limit", n))
		return
	}
	go t.run()
}

// guard contains a panic in one of the tunnel's goroutines to the tunnel.
func (t *tunnelOp) guard(what string) {
	if r := recover(); r != nil {
		t.s.cfg.Logf("panic in tunnel to port %d %s: %v\n%s", t.port, what, r, debug.Stack())
		t.fail(errdefs.Errorf(errdefs.ErrInternal, "agent: tunnel %s: panic: %v", what, r))
	}
}

func (t *tunnelOp) run() {
	defer t.guard("dial")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(t.port))
	c, err := net.DialTimeout("tcp", addr, protocol.TunnelDialTimeout)
	if err != nil {
		t.fail(errdefs.Errorf(errdefs.ErrUnreachable, "tunnel: connect to port %d in the box: %v", t.port, err))
		return
	}
	t.mu.Lock()
	if t.ended { // cancelled while connecting
		t.mu.Unlock()
		c.Close()
		return
	}
	t.conn = c.(*net.TCPConn)
	t.mu.Unlock()
	if f, err := protocol.Encode(protocol.TStarted, 0, protocol.Started{}); err == nil {
		t.send(f)
	}
	go t.writeLoop()
	t.readLoop()
}

// send writes one frame of the stream unless it is over.
func (t *tunnelOp) send(f protocol.Frame) {
	t.s.wmu.Lock()
	defer t.s.wmu.Unlock()
	if t.over {
		return
	}
	f.Stream = t.id
	_ = t.s.writeLocked(f)
}

// end writes the stream's last frame, once, and lets go of the connection.
func (t *tunnelOp) end(f protocol.Frame) {
	t.mu.Lock()
	t.ended = true
	c := t.conn
	t.cond.Broadcast()
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
	t.s.wmu.Lock()
	if !t.over {
		t.over = true
		f.Stream = t.id
		_ = t.s.writeLocked(f)
	}
	t.s.wmu.Unlock()
	t.s.mu.Lock()
	if t.s.tunnels[t.id] == t {
		delete(t.s.tunnels, t.id)
	}
	t.s.mu.Unlock()
}

func (t *tunnelOp) fail(err error) {
	if f, e := protocol.Encode(protocol.TError, 0, protocol.ErrorOf(err)); e == nil {
		t.end(f)
	}
}

// cancel drops the stream without a last frame: the host has gone.
func (t *tunnelOp) cancel() {
	t.s.wmu.Lock()
	t.over = true
	t.s.wmu.Unlock()
	t.end(protocol.Frame{})
}

// maybeDone ends the stream with TExit once both directions are done.
func (t *tunnelOp) maybeDone() {
	t.mu.Lock()
	done := t.readDone && t.writeDone && !t.ended
	t.mu.Unlock()
	if done {
		if f, err := protocol.Encode(protocol.TExit, 0, protocol.Exit{}); err == nil {
			t.end(f)
		}
	}
}

// readLoop sends what the box's side writes within the host's window; at
// EOF it says so (TEOF) and the stream waits for the host's side.
func (t *tunnelOp) readLoop() {
	defer t.guard("read")
	for {
		t.mu.Lock()
		for t.win <= 0 && !t.ended {
			t.cond.Wait()
		}
		if t.ended {
			t.mu.Unlock()
			return
		}
		n := int(min(t.win, outChunk))
		t.mu.Unlock()
		buf := bufPool.Get().(*[]byte)
		k, err := t.conn.Read((*buf)[protocol.HeaderSize : protocol.HeaderSize+n])
		if k > 0 {
			t.mu.Lock()
			t.win -= int64(k)
			t.mu.Unlock()
			t.s.wmu.Lock()
			if !t.over {
				_ = t.s.writeHeadedLocked(protocol.TStdout, t.id, (*buf)[:protocol.HeaderSize+k])
			}
			t.s.wmu.Unlock()
		}
		bufPool.Put(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			t.send(protocol.Frame{Type: protocol.TEOF})
			t.mu.Lock()
			t.readDone = true
			t.mu.Unlock()
			t.maybeDone()
			return
		}
		t.mu.Lock()
		ended := t.ended
		t.mu.Unlock()
		if !ended {
			t.fail(errdefs.Errorf(errdefs.ErrClosed, "tunnel to port %d: %v", t.port, err))
		}
		return
	}
}

// writeLoop writes the host's data into the connection, crediting each
// chunk once written; after TStdinClose drained the queue it half-closes
// the connection. Data the connection no longer takes is dropped but
// still credited, so the host never stalls.
func (t *tunnelOp) writeLoop() {
	defer t.guard("write")
	broken := false
	for {
		t.mu.Lock()
		for len(t.q) == 0 && !t.closed && !t.ended {
			t.cond.Wait()
		}
		if t.ended {
			t.mu.Unlock()
			return
		}
		if len(t.q) == 0 { // closed by the host, all written
			t.mu.Unlock()
			if !broken {
				_ = t.conn.CloseWrite()
			}
			t.mu.Lock()
			t.writeDone = true
			t.mu.Unlock()
			t.maybeDone()
			return
		}
		chunk := t.q[0]
		t.q[0] = nil
		t.q = t.q[1:]
		t.mu.Unlock()
		if !broken {
			if _, err := t.conn.Write(chunk); err != nil {
				broken = true
			}
		}
		t.mu.Lock()
		t.qlen -= len(chunk)
		t.mu.Unlock()
		t.sendCredit(0, len(chunk))
	}
}

func (t *tunnelOp) sendCredit(fd, n int) {
	if f, err := protocol.Encode(protocol.TCredit, 0, protocol.Credit{Fd: fd, Bytes: n}); err == nil {
		t.send(f)
	}
}

// frame serves a host frame on the tunnel's stream.
func (t *tunnelOp) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStdin:
		if len(f.Payload) == 0 {
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			t.fail(errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: data after the host closed its side"))
			return
		}
		if t.qlen+len(f.Payload) > protocol.InitialWindow {
			qlen := t.qlen
			t.mu.Unlock()
			t.fail(errdefs.Errorf(errdefs.ErrLimit, "tunnel: %d bytes sent with %d unacknowledged, window %d", len(f.Payload), qlen, protocol.InitialWindow))
			return
		}
		t.q = append(t.q, f.Payload) // the reader allocates each frame's payload
		t.qlen += len(f.Payload)
		t.cond.Broadcast()
		t.mu.Unlock()
	case protocol.TStdinClose:
		t.mu.Lock()
		t.closed = true
		t.cond.Broadcast()
		t.mu.Unlock()
	case protocol.TCredit:
		var c protocol.Credit
		if err := protocol.Decode(f, &c); err != nil {
			t.fail(err)
			return
		}
		if c.Fd != 1 || c.Bytes <= 0 {
			return
		}
		t.mu.Lock()
		t.win = min(t.win+int64(c.Bytes), maxWindow)
		t.cond.Broadcast()
		t.mu.Unlock()
	case protocol.TCancel:
		t.cancel()
	default:
		t.fail(errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: unexpected %s frame", f.Type))
	}
}
