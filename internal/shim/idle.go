package shim

import (
	"errors"
	"log"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Auto-pause (shimapi.Config.AutoPause): the shim sees every stream of the
// box, so it is the one that knows the box is idle. Activity is a stream
// opening (exec, attach, copy), any frame either way on an open stream, and
// a client's hold (protocol.THold: a session's cell or command under way);
// info and metrics requests are not. An open stream holds the box awake (a
// running command someone waits for, a copy): a pause would end it. A
// detachable exec's stream (a session's interpreter, an interactive shell,
// Command.Detachable) does not: the pause cancels it as a client's pause
// does, the exec runs on and is attached again after the resume (sessions
// do so themselves); while frames flow on it, the box is not idle anyway.
// A session's call that computes silently holds the box by THold.

// errNotIdle: the box became busy between the idle check and the pause.
var errNotIdle = errors.New("the box is not idle")

// touch records activity; s.mu is held.
func (s *shim) touch() { s.lastActive = time.Now() }

// idleLocked reports whether the box may pause itself now; s.mu is held.
func (s *shim) idleLocked() bool {
	if s.stopping || s.pausing || time.Since(s.lastActive) < s.cfg.AutoPause {
		return false
	}
	for _, r := range s.routes {
		if !r.detachable && !r.c.internal {
			return false
		}
	}
	for c := range s.clients {
		if c.held {
			return false
		}
	}
	return true
}

// noteClientFrame classifies a client's frame for auto-pause; s.mu is held
// and r is the frame's route (global is its agent stream id).
func (s *shim) noteClientFrame(f protocol.Frame, global uint32, r route) {
	s.touch()
	switch f.Type {
	case protocol.TExec:
		var req protocol.Exec
		if protocol.Decode(f, &req) == nil && req.Detach != "" {
			r.detachable = true
		}
	case protocol.TAttach:
		r.detachable = true
	default:
		return
	}
	s.routes[global] = r
}

// hold serves a client's THold.
func (s *shim) hold(c *client, f protocol.Frame) {
	var h protocol.Hold
	if protocol.Decode(f, &h) != nil {
		return // a client's garbage: no hold
	}
	s.mu.Lock()
	c.held = h.On
	s.touch()
	s.mu.Unlock()
}

// watchIdle pauses the box once it has been idle for cfg.AutoPause, and
// ends the shim as a client's pause does; it returns when the box ends.
func (s *shim) watchIdle() {
	if s.cfg.AutoPause <= 0 {
		return
	}
	tick := s.cfg.AutoPause / 10
	tick = max(100*time.Millisecond, min(tick, time.Second))
	s.mu.Lock()
	s.touch()
	s.mu.Unlock()
	for {
		select {
		case <-s.vm.Done():
			return
		case <-time.After(tick):
		}
		s.mu.Lock()
		idle := s.idleLocked()
		s.mu.Unlock()
		if !idle {
			continue
		}
		res, err := s.saveState(s.idleLocked)
		if errors.Is(err, errNotIdle) {
			continue
		}
		if err != nil {
			log.Printf("auto-pause failed (the box runs on; next try after %s idle): %v", s.cfg.AutoPause, err)
			s.mu.Lock()
			s.touch()
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		s.reason, s.fault, s.stopping, s.pausing = pausedReason, false, true, false
		s.mu.Unlock()
		log.Printf("auto-paused after %s idle: state of %d bytes saved in %.0f ms; ending the VM", s.cfg.AutoPause, res.StateBytes, res.SaveMs)
		s.vm.Kill() // its disks belong to the saved state now
		return
	}
}
