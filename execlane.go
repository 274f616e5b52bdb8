package boxlite

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// ExecLaneEnv set to "off" keeps execs' stdout on the channel, never the
// lane (protocol.FeatureExecLane): for tests and comparisons. LaneEnv=off
// does too.
const ExecLaneEnv = "BOXLITE_EXEC_LANE"

// execLaneSlots is how many lane slots an exec's stdout may hold: what
// the host buffers of it at most (slots of protocol.LaneSlot).
const execLaneSlots = 8

// execLane is an exec's hold on its box's lane: asked for by the agent
// once its stdout is throughput-bound (TLaneAsk), granted when no copy or
// other exec holds it, given back when the exec ends.
type execLane struct {
	take func() *hostLane // nil: this exec may not use the lane

	mu    sync.Mutex
	asked bool
	l     *hostLane // nil unless granted, and after the exec ended
	slots int       // granted
	n     int       // chunks announced so far
	held  int       // chunks announced and not yet read through
	buf   []byte
	ended bool
}

// allowLane lets the exec use the lane when the agent asks, if its
// request allows (not detachable, not a terminal: req.Lane is set here).
func (e *Execution) allowLane(b *Box, hello protocol.Hello, req *protocol.Exec) {
	if !hello.Has(protocol.FeatureExecLane) || req.Tty || req.Detach != "" || os.Getenv(ExecLaneEnv) == "off" {
		return
	}
	req.Lane = true
	e.lane.take = func() *hostLane { return b.takeLane(hello) }
	e.stdout.laneFree = e.laneFree
}

// onLaneAsk answers the agent's TLaneAsk: the lane's slots, or 0.
func (e *Execution) onLaneAsk() {
	x := &e.lane
	x.mu.Lock()
	if x.take == nil || x.asked {
		x.mu.Unlock()
		e.laneFail(errdefs.Errorf(errdefs.ErrInvalidArgument, "the box asked for the lane on an exec that may not have it, or twice"))
		return
	}
	x.asked = true
	if !x.ended {
		if x.l = x.take(); x.l != nil {
			x.slots = min(execLaneSlots, x.l.slots)
			x.buf = make([]byte, protocol.LaneSlot)
		}
	}
	slots := x.slots
	x.mu.Unlock()
	_ = e.conn.send(protocol.TLaneGrant, e.id, protocol.LaneGrant{Slots: slots})
}

// onLane takes a TLane frame: the exec's next stdout chunk, in its next
// slot, within the slots granted. Its bytes are read into the stdout
// window at once (nothing but what was announced); the slot is freed once
// the window's reader has read them (laneFree).
func (e *Execution) onLane(f protocol.Frame) {
	var ch protocol.LaneChunk
	err := protocol.Decode(f, &ch)
	x := &e.lane
	x.mu.Lock()
	if err == nil {
		err = x.check(ch)
	}
	var data []byte
	if err == nil {
		x.n++
		x.held++
		var k int
		k, err = x.l.f.ReadAt(x.buf[:ch.Len], ch.Off)
		if k < ch.Len {
			err = errdefs.Errorf(errdefs.ErrInternal, "lane: read %d bytes at %d: %d read: %v", ch.Len, ch.Off, k, err)
		} else {
			data, err = x.buf[:k], nil
		}
	}
	if err == nil {
		err = e.stdout.pushOf(data, true) // copies: x.buf is free again
	}
	x.mu.Unlock()
	if err != nil {
		e.laneFail(fmt.Errorf("stdout: %w", err))
	}
}

// check bounds a chunk the box announced.
func (x *execLane) check(ch protocol.LaneChunk) error {
	if x.l == nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "the box announced a lane chunk on an exec without the lane")
	}
	want := int64(x.n%x.slots) * protocol.LaneSlot
	switch {
	case ch.Off != want || ch.Len < 1 || ch.Len > protocol.LaneSlot:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "the box announced a lane chunk of %d bytes at offset %d: want 1 to %d bytes at %d", ch.Len, ch.Off, protocol.LaneSlot, want)
	case x.held >= x.slots:
		return errdefs.Errorf(errdefs.ErrLimit, "the box announced a lane chunk with %d unread, %d slots granted", x.held, x.slots)
	}
	return nil
}

// laneFree gives the oldest chunk's slot back to the agent.
func (e *Execution) laneFree() {
	x := &e.lane
	x.mu.Lock()
	ok := x.held > 0 && !x.ended
	if ok {
		x.held--
	}
	x.mu.Unlock()
	if ok {
		_ = e.conn.send(protocol.TLaneFree, e.id, protocol.LaneFree{Slots: 1})
	}
}

// laneLinger is how long the lane stays held after an exec that held it
// ended other than by its exit (cancelled, failed): the agent may still be
// moving a chunk into a slot, which must not land in the next copy's.
const laneLinger = 5 * time.Second

// laneEnd gives the lane back once the exec has ended (its chunks were
// read into the window already): at once after its exit (exited: the
// agent sends it after its output ended), else after laneLinger.
func (e *Execution) laneEnd(exited bool) {
	x := &e.lane
	x.mu.Lock()
	x.ended = true
	l := x.l
	x.l, x.buf = nil, nil
	x.mu.Unlock()
	switch {
	case l == nil:
	case exited:
		l.release()
	default:
		time.AfterFunc(laneLinger, l.release)
	}
}

// laneFail ends an exec whose box broke the lane's rules: the exec fails
// with err, the box is told to stop it, and the box lives on.
func (e *Execution) laneFail(err error) {
	_ = e.conn.send(protocol.TCancel, e.id, nil)
	e.conn.forget(e.id)
	e.fail(err)
}
