package restclient

import (
	"context"
	"io"

	"sync"
)

// streamWindow is what a stream holds that the caller has not read: the
// attach stops reading the WebSocket past it, and the server holds the
// process back (its own window).
const streamWindow = 1 << 20

// stream is one output stream of an execution: the attach pushes, the
// caller reads (blocking, or not for event loops).
type stream struct {
	mu      sync.Mutex
	chunks  [][]byte
	size    int
	end     error // io.EOF or why it ended; nil while open
	changed chan struct{}
	notify  func()
}

func newStream() *stream { return &stream{changed: make(chan struct{})} }

// wakeLocked tells waiters and the notify hook that something changed.
func (s *stream) wakeLocked() func() {
	close(s.changed)
	s.changed = make(chan struct{})
	return s.notify
}

// push appends p, waiting while the window is full; it gives up when ctx
// ends or the stream was closed.
func (s *stream) push(ctx context.Context, p []byte) error {
	for {
		s.mu.Lock()
		if s.end != nil {
			s.mu.Unlock()
			return s.end
		}
		if s.size < streamWindow {
			s.chunks = append(s.chunks, p)
			s.size += len(p)
			f := s.wakeLocked()
			s.mu.Unlock()
			if f != nil {
				f()
			}
			return nil
		}
		if err := s.unlockAndWait(ctx); err != nil {
			return err
		}
	}
}

// unlockAndWait, called with s.mu held, releases it and waits for the
// next change (or ctx's end).
func (s *stream) unlockAndWait(ctx context.Context) error {
	ch := s.changed
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitRoom waits until the window has room (or the stream ended).
func (s *stream) waitRoom(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.end != nil || s.size < streamWindow {
			s.mu.Unlock()
			return nil
		}
		if err := s.unlockAndWait(ctx); err != nil {
			return err
		}
	}
}

// close ends the stream with err (io.EOF: a normal end); what is buffered
// is still read. The first close wins.
func (s *stream) close(err error) {
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return
	}
	s.end = err
	f := s.wakeLocked()
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// drop ends the stream at once, its buffer dropped (Close).
func (s *stream) drop(err error) {
	s.mu.Lock()
	s.chunks, s.size = nil, 0
	s.mu.Unlock()
	s.close(err)
}

func (s *stream) setNotify(f func()) {
	s.mu.Lock()
	s.notify = f
	s.mu.Unlock()
}

// Read blocks until there are bytes or the end.
func (s *stream) Read(p []byte) (int, error) { return s.read(p, true) }

func (s *stream) read(p []byte, block bool) (int, error) {
	for {
		s.mu.Lock()
		if len(s.chunks) > 0 {
			n := 0
			for n < len(p) && len(s.chunks) > 0 {
				c := copy(p[n:], s.chunks[0])
				n += c
				if c == len(s.chunks[0]) {
					s.chunks = s.chunks[1:]
				} else {
					s.chunks[0] = s.chunks[0][c:]
				}
			}
			s.size -= n
			s.wakeLocked() // room for the attach (a reader needs no notification)
			s.mu.Unlock()
			return n, nil
		}
		if s.end != nil {
			err := s.end
			s.mu.Unlock()
			return 0, err
		}
		ch := s.changed
		s.mu.Unlock()
		if !block {
			return 0, nil
		}
		<-ch
	}
}

// pending reports whether a read would return now.
func (s *stream) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chunks) > 0 || s.end != nil
}

var _ io.Reader = (*stream)(nil)
