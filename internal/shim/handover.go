package shim

import (
	"fmt"
	"log"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// handOverTimeout bounds the agent's answer to a hand-over's identity (a
// few syscalls in the guest).
const handOverTimeout = 10 * time.Second

// handOver serves THandOver: a warm pool's box becomes its new owner's,
// with the owner's hostname and lifecycle settings. Its machine is already
// its own: a pool box's identity (boot id, machine id, a reseeded kernel
// RNG: newIdentity) is made when it enters the pool, from the host's
// randomness, and nothing has seen it since but the pool's warm-up exec.
// So the guest is asked for nothing unless the hostname changes (then the
// agent also steps the clock and reseeds again, as every identity does):
// the common hand-over is the shim's alone.
func (s *shim) handOver(c *client, stream uint32, f protocol.Frame) {
	var req protocol.HandOver
	err := protocol.Decode(f, &req)
	if err == nil {
		err = req.Check()
	}
	if err == nil {
		err = s.applyHandOver(req)
	}
	if err != nil {
		log.Printf("hand-over failed: %v", err)
		c.queueError(stream, err)
		return
	}
	reply, _ := protocol.Encode(protocol.THandOver, stream, req) // what the box now has
	c.queue(reply)
}

func (s *shim) applyHandOver(req protocol.HandOver) error {
	if !s.info.Hello.Has(protocol.FeatureIdentity) {
		return errdefs.Errorf(errdefs.ErrUnsupported, "hand over box %s: the agent cannot take an identity (an older agent)", s.cfg.BoxID)
	}
	t0 := time.Now()
	ch := make(chan protocol.Frame, 1)
	s.mu.Lock()
	if !s.cfg.Pool {
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrInvalidState, "hand over box %s: it is no warm pool's box (or was handed over already)", s.cfg.BoxID)
	}
	if s.stopping || s.pausing || s.control != nil {
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrInvalidState, "hand over box %s: it is stopping, pausing or being handed over", s.cfg.BoxID)
	}
	s.control = ch
	rename := req.Hostname != s.cfg.Hostname
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.control = nil
		s.mu.Unlock()
	}()
	if rename {
		if err := s.controlIdentity(ch, newIdentity(req.Hostname, false)); err != nil {
			return fmt.Errorf("hand over box %s: %w", s.cfg.BoxID, err)
		}
	}
	s.mu.Lock()
	s.cfg.Hostname, s.cfg.AutoRemove, s.cfg.Pool = req.Hostname, req.AutoRemove, false
	watch := s.cfg.AutoPause <= 0 && req.AutoPauseNs > 0
	if watch {
		s.cfg.AutoPause = time.Duration(req.AutoPauseNs)
	}
	s.touch()
	s.mu.Unlock()
	if watch {
		go s.watchIdle()
	}
	log.Printf("handed over as %s in %.1f ms (hostname changed: %v)", req.Hostname, float64(time.Since(t0).Microseconds())/1000, rename)
	return nil
}

// controlIdentity sends the agent id while the box serves clients, and
// waits for its answer, which serveAgent passes on ch.
func (s *shim) controlIdentity(ch chan protocol.Frame, id protocol.Identity) error {
	f, err := protocol.Encode(protocol.TIdentity, 0, id)
	if err == nil {
		err = s.sendAgent(f)
	}
	if err != nil {
		return err
	}
	select {
	case f = <-ch:
	case <-s.vm.Done():
		return errdefs.Errorf(errdefs.ErrInvalidState, "its VM ended")
	case <-time.After(handOverTimeout):
		return errdefs.Errorf(errdefs.ErrTimeout, "the agent did not take its identity within %s", handOverTimeout)
	}
	if err := identityAnswer(f); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	return nil
}

// controlFrame delivers a frame the agent sent on stream 0 to a hand-over
// waiting for it; false when none waits (the frame is a stray).
func (s *shim) controlFrame(f protocol.Frame) bool {
	if f.Stream != 0 {
		return false
	}
	s.mu.Lock()
	ch := s.control
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- f:
	default: // one answer is awaited; a second is a stray
		return false
	}
	return true
}
