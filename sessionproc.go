package boxlite

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/session"
)

// reattachTimeout bounds resuming a paused box and attaching a session's
// process again.
const reattachTimeout = 10 * time.Minute

// sessionProc is a session's process (an interpreter, a shell) that outlives
// a pause of its box: a detachable execution which, when a pause ends its
// stream, is attached again (Box.AttachExec) when the session next writes to
// it, which resumes the box. Until then its readers wait: a paused box is not
// resumed by a session that only listens. What the process printed and the
// host had not taken is sent again on the attach, so nothing is lost.
type sessionProc struct {
	b *Box

	mu          sync.Mutex
	cond        *sync.Cond
	e           *Execution
	gen         int  // counts attaches
	killed      bool // Kill was called: no more attaches
	reattaching bool

	named   bool // a named session's (SessionOptions.Name): Detach keeps it
	adopted bool // taken over from an earlier client
}

// Adopted reports whether the process was a named session's, taken over.
func (p *sessionProc) Adopted() bool { return p.adopted }

// Detach lets go of the process, which runs on in the box for the next
// session of its name; an unnamed session's is killed.
func (p *sessionProc) Detach() error {
	if !p.named {
		return p.Kill()
	}
	p.mu.Lock()
	p.killed = true // no more attaches from here
	e := p.e
	p.cond.Broadcast()
	p.mu.Unlock()
	return e.Close()
}

func newSessionProc(b *Box, e *Execution) *sessionProc {
	p := &sessionProc{b: b, e: e}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *sessionProc) current() (*Execution, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.e, p.gen
}

// broken reports whether e ended because its box paused: not by an exit
// or a Kill.
func (p *sessionProc) broken(e *Execution) bool {
	select {
	case <-e.done:
	default:
		return false
	}
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	if killed || e.err == nil || errors.Is(e.err, errdefs.ErrTimeout) {
		return false
	}
	return p.b.paused() || p.b.State() == StatePaused
}

// waitNext waits for an attach after gen; false if the process was killed.
func (p *sessionProc) waitNext(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.gen == gen && !p.killed {
		p.cond.Wait()
	}
	return !p.killed
}

// reattach resumes the box and attaches the execution again, once for all
// who find e broken.
func (p *sessionProc) reattach(e *Execution) error {
	p.mu.Lock()
	for p.reattaching {
		p.cond.Wait()
	}
	if p.e != e || p.killed {
		p.mu.Unlock()
		return nil // attached again already (or killed: the caller's next use says so)
	}
	p.reattaching = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), reattachTimeout)
	ne, err := p.b.AttachExec(ctx, e.ID())
	cancel()
	p.mu.Lock()
	if err == nil {
		p.e, p.gen = ne, p.gen+1
	}
	p.reattaching = false
	p.cond.Broadcast()
	p.mu.Unlock()
	return err
}

func (p *sessionProc) Stdin() io.WriteCloser { return sessionStdin{p} }
func (p *sessionProc) Stdout() io.Reader     { return sessionReader{p, 1} }
func (p *sessionProc) Stderr() io.Reader     { return sessionReader{p, 2} }

type sessionReader struct {
	p  *sessionProc
	fd int
}

func (r sessionReader) Read(b []byte) (int, error) {
	for {
		e, gen := r.p.current()
		src := e.Stdout
		if r.fd == 2 {
			src = e.Stderr
		}
		n, err := src.Read(b)
		if n > 0 || err == nil || !r.p.broken(e) {
			return n, err
		}
		if !r.p.waitNext(gen) {
			return 0, err
		}
	}
}

type sessionStdin struct{ p *sessionProc }

func (w sessionStdin) Write(b []byte) (int, error) {
	for tries := 0; ; tries++ {
		e, _ := w.p.current()
		if w.p.broken(e) {
			if err := w.p.reattach(e); err != nil {
				return 0, err
			}
			e, _ = w.p.current()
		}
		n, err := e.Stdin.Write(b)
		if err != nil && n == 0 && tries == 0 {
			// The pause may have ended the stream under the write: its
			// Execution learns of it a moment later.
			select {
			case <-e.done:
			case <-time.After(2 * time.Second):
			}
			if w.p.broken(e) {
				continue
			}
		}
		return n, err
	}
}

func (w sessionStdin) Close() error {
	e, _ := w.p.current()
	return e.Stdin.Close()
}

func (p *sessionProc) Signal(sig syscall.Signal) error {
	e, _ := p.current()
	return e.Signal(sig)
}

func (p *sessionProc) SignalGroup(sig syscall.Signal) error {
	e, _ := p.current()
	return e.SignalGroup(sig)
}

// Kill ends the process with its group (a detachable execution's Close
// alone would leave it running), or, in a paused box, leaves it there
// with its stream gone.
func (p *sessionProc) Kill() error {
	p.mu.Lock()
	p.killed = true
	e := p.e
	p.cond.Broadcast()
	p.mu.Unlock()
	select {
	case <-e.done:
		return nil
	default:
	}
	e.SignalGroup(syscall.SIGKILL)
	if p.named {
		// Its exit is awaited, so that the box has forgotten its name when
		// the session starts the next process under it.
		select {
		case <-e.done:
			return nil
		case <-time.After(5 * time.Second):
		}
	}
	return e.Close()
}

func (p *sessionProc) Wait() (session.ExitStatus, error) {
	for {
		e, gen := p.current()
		st, err := e.Wait(context.Background())
		if p.broken(e) && p.waitNext(gen) {
			continue
		}
		return session.ExitStatus{Code: st.Code, Signal: st.Signal}, err
	}
}
