package boxlite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// conn is one client connection to a box's shim. Streams are multiplexed on
// it by id; one goroutine reads and routes frames, writers share a mutex.
type conn struct {
	c  net.Conn
	wm sync.Mutex
	w  *protocol.Writer

	mu      sync.Mutex
	streams map[uint32]handler
	// detach: the streams of detachable processes (a session's, an
	// attach): a pause does not cut them, it detaches them.
	detach map[uint32]bool
	next   uint32
	err    error // why the connection ended; set once
	broken bool  // it ended because the box broke the protocol (violation)
	done   chan struct{}
	// noted is closed once the box that holds the connection has taken
	// note of its end (Box.attach's handler).
	noted chan struct{}
	why   func() error // explains an unexpected end (the box stopped), if set

	// active is when a stream was last opened or a frame last came (Unix
	// nanoseconds): the box's last activity this process saw.
	active atomic.Int64
}

// closed tells whether the connection has ended.
func (c *conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// busy: a stream is open that a pause would cut (a command someone waits
// for, a copy), as the shim's auto-pause judges it.
func (c *conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams) > len(c.detach)
}

// handler receives the frames of one stream. It must not block: data is
// bounded by the window the stream granted.
type handler interface {
	frame(protocol.Frame)
	fail(error) // the connection ended before the stream did
}

// dialShim connects to a shim; why, if not nil, explains an unexpected end.
func dialShim(path string, why func() error) (*conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	cn := &conn{c: c, w: protocol.NewWriter(c), streams: map[uint32]handler{}, detach: map[uint32]bool{}, next: 1, done: make(chan struct{}), noted: make(chan struct{}), why: why}
	go cn.readLoop()
	return cn, nil
}

func (c *conn) readLoop() {
	r := protocol.NewReader(c.c)
	var err error
	defer func() {
		// What arrives here comes from the guest: a bug it triggers must end
		// this box's connection, not the host process.
		if p := recover(); p != nil {
			c.shutdown(errdefs.Errorf(errdefs.ErrInternal, "connection to box: panic while handling a frame: %v", p))
		}
	}()
	for {
		var f protocol.Frame
		if f, err = r.ReadFrame(); err != nil {
			break
		}
		c.mu.Lock()
		h := c.streams[f.Stream]
		if f.Type.Last() {
			delete(c.streams, f.Stream)
			delete(c.detach, f.Stream)
		}
		c.mu.Unlock()
		if h != nil {
			c.active.Store(time.Now().UnixNano())
			h.frame(f)
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
		err = errdefs.Errorf(errdefs.ErrClosed, "connection to box closed")
		if c.why != nil {
			err = c.why()
		}
	}
	c.shutdown(err)
}

func (c *conn) shutdown(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams, c.detach = map[uint32]handler{}, map[uint32]bool{}
	c.mu.Unlock()
	c.c.Close()
	for _, h := range streams {
		h.fail(err)
	}
	close(c.done)
}

// violation ends the connection because the box broke the protocol (the
// shim polices the agent first; this is the second line): every stream fails
// with the reason.
func (c *conn) violation(err error) {
	c.mu.Lock()
	c.broken = c.err == nil
	c.mu.Unlock()
	c.shutdown(errdefs.Errorf(errdefs.ErrInvalidState, "box disconnected: agent protocol violation: %v", err))
}

// brokenBy is the violation that ended the connection, or nil.
func (c *conn) brokenBy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.broken {
		return nil
	}
	return c.err
}

func (c *conn) Close() error {
	c.shutdown(errdefs.Errorf(errdefs.ErrClosed, "connection closed"))
	return nil
}

// open registers h on a new stream and sends its first frame.
func (c *conn) open(h handler, t protocol.Type, body any) (uint32, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, c.err
	}
	id := c.next
	c.next++
	c.active.Store(time.Now().UnixNano())
	if b, ok := h.(interface{ bind(uint32) }); ok {
		b.bind(id) // before any frame of the stream can arrive
	}
	c.streams[id] = h
	if ex, ok := body.(protocol.Exec); t == protocol.TAttach || ok && ex.Detach != "" {
		c.detach[id] = true
	}
	c.mu.Unlock()
	if err := c.send(t, id, body); err != nil {
		c.forget(id)
		return 0, err
	}
	return id, nil
}

func (c *conn) send(t protocol.Type, stream uint32, body any) error {
	f, err := protocol.Encode(t, stream, body)
	if err != nil {
		return err
	}
	return c.sendFrame(f)
}

func (c *conn) sendFrame(f protocol.Frame) error {
	if len(f.Payload) > protocol.MaxPayload { // refused here, not a broken connection
		return errdefs.Errorf(errdefs.ErrLimit, "%s request of %d bytes exceeds the frame limit of %d", f.Type, len(f.Payload), protocol.MaxPayload)
	}
	c.wm.Lock()
	defer c.wm.Unlock()
	if err := c.w.WriteFrame(f); err != nil {
		// A write fails when the shim is gone; the reader then sees the end
		// too and says why (the box stopped, and the cause). Give it a
		// moment, so that the caller gets that rather than "broken pipe".
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			c.shutdown(fmt.Errorf("send %s: %v: %w", f.Type, err, errdefs.ErrClosed))
		}
		c.mu.Lock()
		cerr := c.err
		c.mu.Unlock()
		return cerr
	}
	return nil
}

// forget drops a stream's handler; later frames for it are ignored.
func (c *conn) forget(id uint32) {
	c.mu.Lock()
	delete(c.streams, id)
	delete(c.detach, id)
	c.mu.Unlock()
}

// requestTimeout bounds a one-shot request to the shim, which answers from
// memory: only a wedged shim takes longer.
const requestTimeout = 10 * time.Second

// request sends a one-shot request and decodes its single reply into out.
func (c *conn) request(t protocol.Type, body, out any) error {
	return c.requestWithin(context.Background(), t, body, out, requestTimeout)
}

// requestWithin is request with its own deadline, for a request the shim
// takes time to answer (a pause).
func (c *conn) requestWithin(ctx context.Context, t protocol.Type, body, out any, timeout time.Duration) error {
	r := &reply{ch: make(chan protocol.Frame, 1), errc: make(chan error, 1)}
	id, err := c.open(r, t, body)
	if err != nil {
		return err
	}
	defer c.forget(id)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-timer.C:
		return errdefs.Errorf(errdefs.ErrTimeout, "%s request: no answer from the box's shim within %s", t, timeout)
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "%s request: %v (the shim may still complete it)", t, ctx.Err())
	case f := <-r.ch:
		if f.Type == protocol.TError {
			var e protocol.Error
			if err := protocol.Decode(f, &e); err != nil {
				return err
			}
			return e.Err()
		}
		return protocol.Decode(f, out)
	case err := <-r.errc:
		return err
	}
}

type reply struct {
	ch   chan protocol.Frame
	errc chan error
}

func (r *reply) frame(f protocol.Frame) {
	select {
	case r.ch <- f:
	default:
	}
}
func (r *reply) fail(err error) {
	select {
	case r.errc <- err:
	default:
	}
}
