package shim

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The box's health check (protocol.HealthCheck) lives in its shim, so it
// runs as long as the box does, whichever process made or uses it. Each
// check is an exec on a stream of the shim's own: an internal client joined
// to serveClient by a pipe, so its frames are routed and policed as any
// client's, but it counts neither as activity (auto-pause) nor in the
// box's metrics. One timer drives it; every wait has a deadline.

// healthEnv is a check's environment: the shim does not know the image's.
var healthEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// healthGrace is how long past its timeout a check's answer may take: the
// agent ends a timed-out process with TERM, then KILL after its grace
// (protocol.Exec.GraceMs, 2 s by default), and reports its exit.
const healthGrace = 5 * time.Second

// health is a box's health check and its state.
type health struct {
	cfg   protocol.HealthCheck
	since time.Time // when the box became ready

	mu sync.Mutex
	st protocol.HealthStatus
}

func (h *health) status() *protocol.HealthStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.st
	return &st
}

// record folds a check's result into the state, as docker's HEALTHCHECK:
// within the start period a failure does not count.
func (h *health) record(err error, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.LastCheckMs = at.UnixMilli()
	if err == nil {
		h.st.State, h.st.Failures, h.st.LastError = protocol.HealthHealthy, 0, ""
		return
	}
	h.st.LastError = err.Error()
	if at.Sub(h.since) < h.cfg.StartPeriod {
		return
	}
	h.st.Failures++
	if h.st.Failures >= h.cfg.Retries {
		h.st.State = protocol.HealthUnhealthy
	}
}

// fail makes the box unhealthy at once: its checks cannot run any more.
func (h *health) fail(err error, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.State, h.st.LastError, h.st.LastCheckMs = protocol.HealthUnhealthy, err.Error(), at.UnixMilli()
	h.st.Failures++
}

// startHealth starts the box's health checks, if it has any.
func (s *shim) startHealth() {
	hc := s.cfg.HealthCheck
	if hc == nil {
		return
	}
	if err := hc.Check(); err != nil { // the library checked it; a hand-edited config is refused here
		log.Printf("health check not started: %v", err)
		return
	}
	h := &health{cfg: *hc, since: time.Now(), st: protocol.HealthStatus{State: protocol.HealthStarting}}
	if rec := s.resumedHealth; rec != nil && knownHealth(rec.Health.State) {
		// Resumed: the same machine, as it was at the pause.
		h.st = *rec.Health
		h.since = h.since.Add(-time.Duration(max(rec.HealthUpMs, 0)) * time.Millisecond)
	}
	near, far := net.Pipe()
	c := &client{conn: far, w: protocol.NewWriter(far), streams: map[uint32]uint32{}, internal: true}
	c.cond = sync.NewCond(&c.mu)
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		near.Close()
		far.Close()
		return
	}
	s.health = h
	s.clients[c] = true
	s.mu.Unlock()
	go c.writeLoop()
	go s.serveClient(c)
	go s.healthLoop(h, near)
}

// knownHealth tells a state a check can be in.
func knownHealth(state string) bool {
	return state == protocol.HealthStarting || state == protocol.HealthHealthy || state == protocol.HealthUnhealthy
}

// healthLoop runs a check every interval until the box stops.
func (s *shim) healthLoop(h *health, conn net.Conn) {
	defer conn.Close()
	p := &healthProbe{conn: conn, r: protocol.NewReader(conn), w: protocol.NewWriter(conn)}
	t := time.NewTimer(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.vm.Done():
			return
		}
		err := p.check(h.cfg)
		if errors.Is(err, errCheckSkipped) {
			t.Reset(h.cfg.Interval)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return // the box is going away
		}
		if errors.Is(err, errProbeBroken) {
			// The box stopped taking the checks' frames: no check can run
			// again, and a box that does not answer is not healthy.
			h.fail(err, time.Now())
			return
		}
		h.record(err, time.Now())
		t.Reset(h.cfg.Interval)
	}
}

var (
	// errCheckSkipped: the box could take no exec just then (a pause under
	// way); the check neither passed nor failed.
	errCheckSkipped = errors.New("health check skipped")
	// errProbeBroken: the probe's stream state is lost (a frame that would
	// not go out in time): no further check can trust the pipe.
	errProbeBroken = errors.New("health probe broken")
)

// healthProbe is the health check's end of its pipe.
type healthProbe struct {
	conn net.Conn
	r    *protocol.Reader
	w    *protocol.Writer
	next uint32
}

// check runs one check: nil when the command exited 0 within the timeout.
func (p *healthProbe) check(hc protocol.HealthCheck) error {
	p.next++
	id := p.next
	req := protocol.Exec{Argv: hc.Command, Env: healthEnv, Cwd: "/", TimeoutMs: hc.Timeout.Milliseconds()}
	f, err := protocol.Encode(protocol.TExec, id, req)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(hc.Timeout + healthGrace)
	p.conn.SetDeadline(deadline)
	if err := p.w.WriteFrame(f); err != nil {
		return fmt.Errorf("%w: %v", errProbeBroken, err)
	}
	output := 0
	for {
		f, err := p.r.ReadFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// No answer in time: cancel it (the agent kills it) and fail.
			p.conn.SetDeadline(time.Now().Add(time.Second))
			if werr := p.w.WriteFrame(protocol.Frame{Type: protocol.TCancel, Stream: id}); werr != nil {
				return fmt.Errorf("%w: %v", errProbeBroken, werr)
			}
			return fmt.Errorf("no answer within %s", hc.Timeout+healthGrace)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errProbeBroken, err)
		}
		if f.Stream != id {
			continue // what an earlier, cancelled check's stream still had in flight
		}
		switch f.Type {
		case protocol.TStarted:
		case protocol.TStdout, protocol.TStderr:
			// Discarded and never credited: a check that prints more than
			// a stream's window waits until its timeout.
			output += len(f.Payload)
		case protocol.TExit:
			var x protocol.Exit
			if err := protocol.Decode(f, &x); err != nil {
				return err
			}
			switch {
			case x.TimedOut:
				return fmt.Errorf("timed out after %s", hc.Timeout)
			case x.Signal != 0:
				return fmt.Errorf("killed by signal %d", x.Signal)
			case x.Code != 0:
				return fmt.Errorf("exit code %d", x.Code)
			}
			return nil
		case protocol.TError:
			var e protocol.Error
			protocol.Decode(f, &e)
			err := e.Err()
			if errdefs.KindOf(err) == errdefs.KindOf(errdefs.ErrInvalidState) {
				return fmt.Errorf("%w: %v", errCheckSkipped, err)
			}
			return err
		default:
			return fmt.Errorf("unexpected %s frame", f.Type)
		}
	}
}
