//go:build linux

package agent

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// An exec's stdout through the lane (protocol.FeatureExecLane): once an
// exec whose request allows it (Exec.Lane) has sent laneAskAfter bytes of
// stdout on the channel, the agent asks for the lane (TLaneAsk). The host
// grants slots (TLaneGrant) when no copy or other exec holds it; stdout then
// goes on in slot-sized chunks moved to the lane O_DIRECT (spliced from the
// pipe while its buffers are whole pages, else read and written), each announced
// by a TLane frame on the stream in order with its stderr frames, within
// the granted slots (the host frees each with TLaneFree once read). Small
// outputs never ask; a refused ask stays on the channel.

// laneAskAfter is how much stdout an exec sends on the channel before it
// asks for the lane: a stream this long is likely throughput-bound.
const laneAskAfter = 1 << 20

// execLane is an exec's lane state: asked and sent are the stdout pump's;
// the rest is under the execution's mu.
type execLane struct {
	ok      bool  // Exec.Lane, and this agent has a lane
	asked   bool  // TLaneAsk sent
	sent    int64 // stdout bytes sent on the channel
	slots   int   // granted and held, 0 before (or never)
	held    int   // chunks announced and not yet freed
	next    int   // chunks announced so far
	done    bool  // the stdout pump has ended: a late grant is not taken
	release func()
	buf     []byte
	// noSplice: the pipe held a buffer splice could not move to the lane
	// (unaligned); this exec's chunks are read from then on.
	noSplice bool
}

// maybeAskLane notes k bytes of stdout sent on the channel, and asks for
// the lane once there were enough.
func (e *execution) maybeAskLane(k int) {
	l := &e.lane
	if !l.ok || l.asked {
		return
	}
	if l.sent += int64(k); l.sent < laneAskAfter {
		return
	}
	l.asked = true
	e.send(protocol.Frame{Type: protocol.TLaneAsk})
}

// onLaneGrant takes the host's answer to TLaneAsk.
func (e *execution) onLaneGrant(f protocol.Frame) {
	var g protocol.LaneGrant
	if err := protocol.Decode(f, &g); err != nil {
		e.fail(err)
		return
	}
	dev := e.s.cfg.Lane
	e.mu.Lock()
	switch {
	case !e.lane.ok || g.Slots == 0 || e.lane.done:
		e.mu.Unlock()
		return
	case e.lane.slots != 0 || g.Slots < 0 || dev == nil || g.Slots > dev.slots:
		e.mu.Unlock()
		e.fail(errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: a lane grant of %d slots (lane of %d slots, %d granted already)", g.Slots, laneSlots(dev), e.lane.slots))
		return
	}
	select {
	case dev.busy <- struct{}{}: // a copy still ending in the agent holds it otherwise
		e.lane.slots, e.lane.release = g.Slots, func() { <-dev.busy }
		e.cond.Broadcast()
	default:
	}
	e.mu.Unlock()
}

func laneSlots(l *laneDev) int {
	if l == nil {
		return 0
	}
	return l.slots
}

// onLaneFree takes the host's TLaneFree: it has read the oldest chunks.
func (e *execution) onLaneFree(f protocol.Frame) {
	var lf protocol.LaneFree
	err := protocol.Decode(f, &lf)
	e.mu.Lock()
	if err == nil && (lf.Slots <= 0 || lf.Slots > e.lane.held) {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: %d lane slots freed, %d held", lf.Slots, e.lane.held)
	}
	if err == nil {
		e.lane.held -= lf.Slots
		e.cond.Broadcast()
	}
	e.mu.Unlock()
	if err != nil {
		e.fail(err)
	}
}

// laneEnd gives the lane back when the stdout pump ends.
func (e *execution) laneEnd() {
	e.mu.Lock()
	e.lane.done = true
	release := e.lane.release
	e.lane.release = nil
	e.mu.Unlock()
	if release != nil {
		release()
	}
}

// laneReady reports, under mu, whether stdout goes through the lane.
func (e *execution) laneReadyLocked(fd int) bool { return fd == 1 && e.lane.slots > 0 }

// laneStart readies the pump for the lane: a slot buffer, and a pipe a
// slot long so that a read fills a chunk.
func (e *execution) laneStart(rc syscall.RawConn) {
	if e.lane.buf != nil {
		return
	}
	e.lane.buf = laneBuf()
	_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, protocol.LaneSlot) })
}

// readChunk reads what the pipe holds, up to n bytes, into buf: several
// reads, as a pipe read returns one buffer's worth at most. EAGAIN after
// some bytes is not an error.
func readChunk(fd int, buf []byte) (int, error) {
	k := 0
	for k < len(buf) {
		m, err := unix.Read(fd, buf[k:])
		switch {
		case err == unix.EINTR:
			continue
		case m > 0:
			k += m
			continue
		case k > 0:
			return k, nil
		case err == nil:
			return 0, nil // EOF
		default:
			return 0, err
		}
	}
	return k, nil
}

// laneRead fills the exec's next chunk from the pipe fd: spliced
// straight into its slot when the pipe holds whole aligned buffers (the
// device DMAs from the pipe's pages: no copy through the agent), else read
// into the slot buffer (spliced false).
func (e *execution) laneRead(fd int) (k int, spliced bool, err error) {
	if !e.lane.noSplice {
		off := e.laneOff()
		for {
			var n int64
			n, err = unix.Splice(fd, nil, e.s.cfg.Lane.fd, &off, protocol.LaneSlot, unix.SPLICE_F_NONBLOCK)
			if k = int(n); err != unix.EINTR {
				break
			}
		}
		switch {
		case err == nil:
			return k, k > 0, nil // 0: EOF
		case err == unix.EAGAIN:
			return 0, false, err
		}
		e.lane.noSplice = true // EINVAL: an unaligned buffer; nothing was moved
	}
	k, err = readChunk(fd, e.lane.buf)
	return k, false, err
}

func (e *execution) laneOff() int64 { return int64(e.lane.next%e.lane.slots) * protocol.LaneSlot }

// laneSend announces chunk buf[:k], first writing it into the exec's
// next slot unless it was spliced there.
func (e *execution) laneSend(k int, spliced bool) error {
	off := e.laneOff()
	if !spliced {
		if err := e.s.cfg.Lane.write(e.lane.buf, k, off); err != nil {
			return err
		}
	}
	e.lane.next++
	e.mu.Lock()
	e.lane.held++
	e.mu.Unlock()
	f, err := protocol.Encode(protocol.TLane, 0, protocol.LaneChunk{Off: off, Len: k})
	if err != nil {
		return err
	}
	e.send(f)
	return nil
}
