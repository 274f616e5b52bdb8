// Package testhost is a minimal host side of the agent protocol for tests: it
// reads frames into per-stream queues and offers a Run helper that credits
// output as it arrives and checks the agent never exceeds its window.
package testhost

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Host is one connection to an agent.
type Host struct {
	wmu sync.Mutex
	w   *protocol.Writer

	mu      sync.Mutex
	streams map[uint32]*Stream
	next    uint32
	err     error
	done    chan struct{}
	stream0 *Stream
}

// New starts reading frames from rw.
func New(rw io.ReadWriter) *Host {
	h := &Host{
		w:       protocol.NewWriter(rw),
		streams: make(map[uint32]*Stream),
		done:    make(chan struct{}),
		next:    100,
	}
	h.stream0 = newStream(h, 0)
	h.streams[0] = h.stream0
	go h.readLoop(protocol.NewReader(rw))
	return h
}

func (h *Host) readLoop(r *protocol.Reader) {
	for {
		f, err := r.ReadFrame()
		if err != nil {
			h.mu.Lock()
			h.err = err
			all := h.streams
			h.mu.Unlock()
			for _, s := range all {
				s.push(protocol.Frame{}, err)
			}
			close(h.done)
			return
		}
		h.mu.Lock()
		s := h.streams[f.Stream]
		h.mu.Unlock()
		if s == nil {
			continue // a late frame for a stream we forgot, e.g. after Cancel
		}
		s.push(f, nil)
	}
}

// Done is closed when the connection fails; Err then says why.
func (h *Host) Done() <-chan struct{} { return h.done }

func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Hello waits for the first frame on stream 0: a Hello, or an Error (returned
// as an error).
func (h *Host) Hello(timeout time.Duration) (protocol.Hello, error) {
	var hello protocol.Hello
	f, err := h.stream0.Next(timeout)
	if err != nil {
		return hello, err
	}
	switch f.Type {
	case protocol.THello:
		err = protocol.Decode(f, &hello)
	case protocol.TError:
		var e protocol.Error
		if err = protocol.Decode(f, &e); err == nil {
			err = e.Err()
		}
	default:
		err = fmt.Errorf("first frame is %s, want hello", f.Type)
	}
	return hello, err
}

// Stream0 returns the queue of stream 0 frames after Hello.
func (h *Host) Stream0() *Stream { return h.stream0 }

// Write sends a frame.
func (h *Host) Write(f protocol.Frame) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return h.w.WriteFrame(f)
}

// Send encodes v (nil: no body) and sends it.
func (h *Host) Send(t protocol.Type, stream uint32, v any) error {
	f, err := protocol.Encode(t, stream, v)
	if err != nil {
		return err
	}
	return h.Write(f)
}

// Open registers a stream without sending anything (for raw frames).
func (h *Host) Open(id uint32) *Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id == 0 {
		h.next++
		id = h.next
	}
	s := newStream(h, id)
	h.streams[id] = s
	return s
}

// Forget drops a stream: later frames for it are discarded.
func (h *Host) Forget(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[s.ID] == s {
		delete(h.streams, s.ID)
	}
}

// Exec starts e on a new stream.
func (h *Host) Exec(e protocol.Exec) (*Stream, error) {
	s := h.Open(0)
	if err := h.Send(protocol.TExec, s.ID, e); err != nil {
		return nil, err
	}
	return s, nil
}

// Stream is the queue of frames received on one stream id.
type Stream struct {
	ID uint32
	h  *Host
	// OnStdinCredit, when set before Collect, is called with each Credit for fd 0.
	OnStdinCredit func(n int)

	mu      sync.Mutex
	q       []protocol.Frame
	err     error
	notify  chan struct{}
	started bool // a Started frame was returned by Next
}

func newStream(h *Host, id uint32) *Stream {
	return &Stream{ID: id, h: h, notify: make(chan struct{}, 1)}
}

func (s *Stream) push(f protocol.Frame, err error) {
	s.mu.Lock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
	} else {
		s.q = append(s.q, f)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// ErrTimeout is returned by Next when no frame came in time.
var ErrTimeout = errors.New("testhost: timed out waiting for a frame")

// Next returns the stream's next frame.
func (s *Stream) Next(timeout time.Duration) (protocol.Frame, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if len(s.q) > 0 {
			f := s.q[0]
			s.q[0] = protocol.Frame{}
			s.q = s.q[1:]
			if f.Type == protocol.TStarted {
				s.started = true
			}
			s.mu.Unlock()
			return f, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return protocol.Frame{}, err
		}
		select {
		case <-s.notify:
		case <-deadline.C:
			return protocol.Frame{}, ErrTimeout
		}
	}
}

// Send sends a frame of type t with body v (nil: none) on this stream.
func (s *Stream) Send(t protocol.Type, v any) error { return s.h.Send(t, s.ID, v) }

// SendRaw sends a frame with a raw payload on this stream.
func (s *Stream) SendRaw(t protocol.Type, p []byte) error {
	return s.h.Write(protocol.Frame{Type: t, Stream: s.ID, Payload: p})
}

// Result is what an exec stream produced.
type Result struct {
	Pid            int
	Stdout, Stderr []byte
	Exit           *protocol.Exit
	Err            error // from an Error frame
	// MaxOutstanding is the most output bytes, per fd, that the agent had sent
	// and that were not yet credited back.
	MaxOutstanding [3]int
	StdinCredit    int
	Frames         int
}

// Collect reads the stream to its last frame, crediting output back at once
// (or never, with credit false), and fails on protocol violations.
func (s *Stream) Collect(timeout time.Duration, credit bool) (Result, error) {
	var res Result
	var outstanding [3]int
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	for {
		f, err := s.Next(timeout)
		if err != nil {
			return res, err
		}
		res.Frames++
		switch f.Type {
		case protocol.TStarted:
			var st protocol.Started
			if err := protocol.Decode(f, &st); err != nil {
				return res, err
			}
			if started && res.Pid != 0 {
				return res, errors.New("second started frame")
			}
			started, res.Pid = true, st.Pid
		case protocol.TStdout, protocol.TStderr:
			if !started {
				return res, fmt.Errorf("%s before started", f.Type)
			}
			if len(f.Payload) > protocol.MaxChunk {
				return res, fmt.Errorf("%s chunk of %d bytes > MaxChunk", f.Type, len(f.Payload))
			}
			fd := 1
			if f.Type == protocol.TStdout {
				res.Stdout = append(res.Stdout, f.Payload...)
			} else {
				fd = 2
				res.Stderr = append(res.Stderr, f.Payload...)
			}
			outstanding[fd] += len(f.Payload)
			res.MaxOutstanding[fd] = max(res.MaxOutstanding[fd], outstanding[fd])
			if outstanding[fd] > protocol.InitialWindow {
				return res, fmt.Errorf("fd %d: %d bytes outstanding > window", fd, outstanding[fd])
			}
			if credit {
				if err := s.Send(protocol.TCredit, protocol.Credit{Fd: fd, Bytes: len(f.Payload)}); err != nil {
					return res, err
				}
				outstanding[fd] -= len(f.Payload)
			}
		case protocol.TCredit:
			var c protocol.Credit
			if err := protocol.Decode(f, &c); err != nil {
				return res, err
			}
			res.StdinCredit += c.Bytes
			if s.OnStdinCredit != nil {
				s.OnStdinCredit(c.Bytes)
			}
		case protocol.TExit:
			var ex protocol.Exit
			if err := protocol.Decode(f, &ex); err != nil {
				return res, err
			}
			res.Exit = &ex
			return res, nil
		case protocol.TError:
			var e protocol.Error
			if err := protocol.Decode(f, &e); err != nil {
				return res, err
			}
			res.Err = e.Err()
			return res, nil
		default:
			return res, fmt.Errorf("unexpected %s frame", f.Type)
		}
	}
}

// Run executes e with optional stdin (at most one window, closed after it is
// sent) and collects the result, crediting output as it arrives.
func (h *Host) Run(e protocol.Exec, stdin []byte, timeout time.Duration) (Result, error) {
	if len(stdin) > protocol.InitialWindow {
		return Result{}, fmt.Errorf("testhost: Run takes at most %d bytes of stdin", protocol.InitialWindow)
	}
	if stdin != nil {
		e.Stdin = true
	}
	s, err := h.Exec(e)
	if err != nil {
		return Result{}, err
	}
	defer h.Forget(s)
	if stdin != nil {
		for len(stdin) > 0 {
			n := min(len(stdin), protocol.MaxChunk)
			if err := s.SendRaw(protocol.TStdin, stdin[:n]); err != nil {
				return Result{}, err
			}
			stdin = stdin[n:]
		}
		if err := s.Send(protocol.TStdinClose, nil); err != nil {
			return Result{}, err
		}
	}
	return s.Collect(timeout, true)
}
