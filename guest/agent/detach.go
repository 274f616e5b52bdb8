//go:build linux

package agent

import (
	"slices"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A detachable exec (protocol.Exec.Detach; see internal/protocol/detach.go)
// outlives its stream. Its output goes through sendHeaded as any exec's,
// and is also kept in retain until the host credits it: at most a window
// per fd, since the window counts exactly those bytes. A cancelled stream
// detaches it (gone): the pumps go on filling retain while the window
// lasts, then stop reading, so the process blocks on its pipes. An attach
// gives it a new stream and resends what retain holds; that is what the
// new host's window starts with.

// detached is what a detachable exec adds to an execution. detachID is
// set before the exec runs and never changes; the rest is guarded by
// s.wmu (epoch by both s.wmu and e.mu: written under both, read under
// either).
type detached struct {
	detachID string
	gone     bool      // detached: no stream; frames are not sent
	retain   [3][]byte // fd 1 and 2: bytes read and not yet credited
	epoch    uint64    // streams the exec has had: 0, then +1 per detach and attach
	ended    *protocol.Frame
	endedAt  time.Time // when ended was kept
}

// acked drops n credited bytes of fd from retain and returns how many it
// held (an honest host never credits more than it got).
func (e *execution) acked(fd, n int) int {
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	n = min(n, len(e.retain[fd]))
	e.retain[fd] = e.retain[fd][n:]
	if len(e.retain[fd]) == 0 {
		e.retain[fd] = nil
	}
	return n
}

// detach lets go of the exec's stream: the host has gone. Stdin it sent
// that the process did not take is dropped (its credit would go to a stream
// that no longer exists).
func (e *execution) detach() {
	e.s.wmu.Lock()
	if e.over.Load() || e.gone {
		e.s.wmu.Unlock()
		return
	}
	e.gone = true
	old := e.id
	e.mu.Lock()
	e.epoch++
	e.stdinQ, e.stdinPending = nil, 0
	e.cond.Broadcast()
	e.mu.Unlock()
	e.s.wmu.Unlock()
	e.s.mu.Lock()
	if e.s.execs[old] == e {
		delete(e.s.execs, old)
	}
	e.s.mu.Unlock()
	e.s.cfg.Logf("exec %s (pid %d): detached from stream %d", e.detachID, e.boxPid, old)
}

// attachResult is what an attach found.
type attachResult int

const (
	attached  attachResult = iota // the exec runs on the new stream
	finished                      // it had ended: its exit went to the new stream
	busy                          // another stream holds it
	delivered                     // its exit went to a stream already: it is being forgotten
)

// attach resumes a detached exec on stream id: Started, the retained
// output, and the exit if it has ended. It fails if another stream holds
// the exec, or its exit has been delivered (release has not yet dropped it
// from the tables, but an attach must not see it).
func (e *execution) attach(id uint32) attachResult {
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.over.Load() {
		return delivered
	}
	if !e.gone {
		return busy
	}
	e.gone, e.id = false, id
	e.mu.Lock()
	e.epoch++
	e.mu.Unlock()
	if f, err := protocol.Encode(protocol.TStarted, id, protocol.Started{Pid: e.boxPid, Tty: e.tty != nil, Stdin: e.stdin != nil}); err == nil {
		_ = e.s.writeLocked(f)
	}
	for fd, t := range map[int]protocol.Type{1: protocol.TStdout, 2: protocol.TStderr} {
		b := e.retain[fd]
		for len(b) > 0 {
			n := min(len(b), outChunk)
			_ = e.s.writeLocked(protocol.Frame{Type: t, Stream: id, Payload: b[:n]})
			b = b[n:]
		}
	}
	if e.ended != nil {
		f := *e.ended
		f.Stream = id
		e.ended = nil
		e.over.Store(true)
		_ = e.s.writeLocked(f)
		return finished
	}
	return attached
}

// startAttach serves TAttach: the exec named takes this stream.
func (s *server) startAttach(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "attach on stream 0: an attach needs a stream id of its own"))
		return
	}
	var req protocol.Attach
	if err := protocol.Decode(f, &req); err != nil {
		s.failStream(id, err)
		return
	}
	if err := protocol.CheckDetachID("attach", req.ID); err != nil {
		s.sendError(id, err)
		return
	}
	if req.Live {
		s.forgetEnded(req.ID)
	}
	s.mu.Lock()
	e := s.detached[req.ID]
	_, inUse := s.execs[id]
	if e != nil && !inUse {
		s.execs[id] = e // before any frame of the stream can come back
	}
	s.mu.Unlock()
	switch {
	case inUse:
		s.failStream(id, errdefs.Errorf(errdefs.ErrAlreadyExists, "attach on stream %d: the stream is in use", id))
		return
	case e == nil:
		s.sendError(id, errdefs.Errorf(errdefs.ErrNotFound, "attach: no exec %s in this box (it never ran detachable, or it ended and was forgotten)", req.ID))
		return
	}
	r := e.attach(id)
	if r != attached {
		s.mu.Lock()
		if s.execs[id] == e {
			delete(s.execs, id)
		}
		if r != busy {
			s.forgetLocked(e)
		}
		s.mu.Unlock()
	}
	switch r {
	case busy:
		s.sendError(id, errdefs.Errorf(errdefs.ErrAlreadyExists, "attach: exec %s is attached to another stream (one at a time)", req.ID))
		return
	case delivered:
		s.sendError(id, errdefs.Errorf(errdefs.ErrNotFound, "attach: no exec %s in this box (it ended and was forgotten)", req.ID))
		return
	}
	s.cfg.Logf("exec %s (pid %d): attached to stream %d", req.ID, e.boxPid, id)
}

// forgetEnded forgets the detachable exec id if it ended while detached:
// an attach that wants a live one (protocol.Attach.Live) does not get it.
func (s *server) forgetEnded(id string) {
	s.mu.Lock()
	e := s.detached[id]
	s.mu.Unlock()
	if e == nil {
		return
	}
	s.wmu.Lock()
	ended := e.ended != nil && e.gone
	s.wmu.Unlock()
	if ended {
		s.mu.Lock()
		s.forgetLocked(e)
		s.mu.Unlock()
	}
}

// register records a detachable exec before it runs; an id in use or too
// many of them is an error.
func (s *server) register(e *execution, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.detached[id]; ok {
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "exec: a detachable exec %s exists already", id)
	}
	if len(s.detached) >= protocol.MaxDetachedExecs {
		return errdefs.Errorf(errdefs.ErrLimit, "exec: %d detachable execs are held, the limit", len(s.detached))
	}
	e.detachID = id
	s.detached[id] = e
	return nil
}

// detachedDone is called once a detachable exec is released: one that
// ended while detached is kept for an attach (within the bounds), any
// other forgotten.
func (s *server) detachedDone(e *execution) {
	s.wmu.Lock()
	kept := e.ended != nil
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !kept {
		s.forgetLocked(e)
		return
	}
	if s.detached[e.detachID] != e {
		return
	}
	s.finished = append(s.finished, e)
	for len(s.finished) > protocol.MaxDetachedExits {
		s.cfg.Logf("exec %s: exit status dropped (more than %d kept)", s.finished[0].detachID, protocol.MaxDetachedExits)
		s.forgetLocked(s.finished[0])
	}
	time.AfterFunc(protocol.DetachedExitKeep, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if slices.Contains(s.finished, e) {
			s.forgetLocked(e)
		}
	})
}

// forgetLocked drops a detachable exec from the server's tables.
func (s *server) forgetLocked(e *execution) {
	if s.detached[e.detachID] == e {
		delete(s.detached, e.detachID)
	}
	if i := slices.Index(s.finished, e); i >= 0 {
		s.finished = slices.Delete(s.finished, i, i+1)
	}
}
