package session

import (
	"context"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
)

// instance is one process of a session (an interpreter, a shell) as the
// supervisor keeps it.
type instance interface {
	comparable
	// dead reports whether the process has ended.
	dead() bool
	// stop kills the process on purpose: what runs in it fails with err.
	stop(err error)
	// detach lets go of a named session's process, which runs on for the
	// next session of its name (Options.Name); what runs in it here fails
	// with err.
	detach(err error)
}

// supervisor keeps the process of a session of any kind: it starts one when
// there is none (ensure), replaces one that ended on its own in the
// background (restart), starts a fresh one (reset), stops it for good
// (close), and lets one cell or command run at a time (acquire, release).
type supervisor[P instance] struct {
	what   string // "python session", for errors
	work   string // "cell", "command": what runs one at a time
	launch func(ctx context.Context) (P, error)
	keep   bool          // a named session: close detaches the process
	busy   chan struct{} // holds one token while a cell or command runs
	onBusy BusyFunc      // told when a turn is taken and ended; may be nil

	mu       sync.Mutex
	cur      P             // the process; the zero P when there is none
	starting chan struct{} // closed when the start under way ends
	closed   bool
	launches int // processes started
}

func newSupervisor[P instance](what, work string, launch func(context.Context) (P, error), onBusy BusyFunc) *supervisor[P] {
	return &supervisor[P]{what: what, work: work, launch: launch, busy: make(chan struct{}, 1), onBusy: onBusy}
}

// BusyFunc is told true when a session's cell or command begins and false
// when it ends: the box holds itself awake meanwhile (auto-pause).
type BusyFunc func(busy bool)

// acquire waits until no cell or command runs and takes the turn.
func (s *supervisor[P]) acquire(ctx context.Context) error {
	select {
	case s.busy <- struct{}{}:
		if s.onBusy != nil {
			s.onBusy(true)
		}
		return nil
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "%s: waiting for the %s before: %v", s.what, s.work, ctx.Err())
	}
}

// release ends the turn acquire took.
func (s *supervisor[P]) release() {
	if s.onBusy != nil {
		s.onBusy(false)
	}
	<-s.busy
}

// current is the process, the zero P when none runs.
func (s *supervisor[P]) current() P {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// restarts counts the processes started after the first.
func (s *supervisor[P]) restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.launches-1, 0)
}

func (s *supervisor[P]) closedErr() error {
	return errdefs.Errorf(errdefs.ErrClosed, "%s: it is closed", s.what)
}

// ensure returns the running process, starting one (or waiting for the
// start under way) if there is none.
func (s *supervisor[P]) ensure(ctx context.Context) (P, error) {
	var zero P
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return zero, s.closedErr()
		}
		if p := s.cur; p != zero && !p.dead() {
			s.mu.Unlock()
			return p, nil
		}
		if ch := s.starting; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return zero, errdefs.Errorf(errdefs.ErrTimeout, "%s: waiting for its process to start: %v", s.what, ctx.Err())
			}
		}
		ch := make(chan struct{})
		s.starting = ch
		s.mu.Unlock()
		p, err := s.launch(ctx)
		s.mu.Lock()
		s.starting = nil
		if err == nil {
			if s.closed {
				p.stop(s.closedErr())
				p, err = zero, s.closedErr()
			} else {
				s.cur = p
				s.launches++
			}
		}
		s.mu.Unlock()
		close(ch)
		return p, err
	}
}

// restart replaces a process that ended on its own (or was killed after an
// interrupt), in the background, so the next cell or command finds one
// warm. A failure to start is the next one's to report.
func (s *supervisor[P]) restart(dead P) {
	var zero P
	s.mu.Lock()
	if s.closed || s.cur != dead {
		s.mu.Unlock()
		return
	}
	s.cur = zero
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		s.ensure(ctx)
	}()
}

// reset stops the process (what runs in it fails with ErrClosed) and starts
// a fresh one once the cell or command under way has ended.
func (s *supervisor[P]) reset(ctx context.Context) error {
	var zero P
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrClosed, "reset %s: it is closed", s.what)
	}
	p := s.cur
	s.cur = zero
	s.mu.Unlock()
	if p != zero {
		p.stop(errdefs.Errorf(errdefs.ErrClosed, "%s: the session was reset", s.what))
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	_, err := s.ensure(ctx)
	return err
}

// close stops the process for good; what runs in it fails with ErrClosed.
// Closing twice is a no-op.
func (s *supervisor[P]) close() error {
	var zero P
	s.mu.Lock()
	p := s.cur
	s.closed, s.cur = true, zero
	s.mu.Unlock()
	if p != zero {
		err := errdefs.Errorf(errdefs.ErrClosed, "%s: closed", s.what)
		if s.keep {
			p.detach(err)
		} else {
			p.stop(err)
		}
	}
	return nil
}
