package shim

import (
	"fmt"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The agent is hostile: the guest's kernel and root may be the attacker's.
// The shim checks every frame it routes from the agent against what an honest
// agent could send, so that what it queues for a client stays bounded by the
// flow-control windows, and a box that breaks the rules is stopped.

// maxStrayFrames is how many frames the agent may send on stream 0 after its
// hello, or on streams that have ended, before the box is stopped. Late
// frames of a cancelled stream are normal; an unbounded number is not.
const maxStrayFrames = 4096

// flow is the shim's account of one stream's flow control.
type flow struct {
	kind    protocol.Type // the request that opened the stream: TExec, TCopyIn, TCopyOut, TTunnel, TWatch, TReleaseRoot, TRootUsage, TRootCgroup, TRootOOM
	unread  [3]int        // bytes of fd 1 and 2 the agent sent that the client has not credited
	stdin   int           // bytes of stdin the client sent that the agent has not credited
	started bool
	eof     bool // a tunnel's TEOF came
	resumed bool // opened by TAttach: an error before started is no failed exec
	// lane is the slots a copy asked for; laneHeld the chunks announced
	// on it that the receiver has not freed.
	lane, laneHeld int
	laneAsked      bool      // an exec's TLaneAsk came
	m              *counters // the box's, for execs that fail to start and bytes of execs
}

// fromAgent checks an agent frame for the stream fl accounts for.
func (fl *flow) fromAgent(f protocol.Frame) error {
	if fl.kind == protocol.TCopyIn || fl.kind == protocol.TCopyOut || fl.kind == protocol.TWatch || fl.kind == protocol.TReleaseRoot || fl.kind == protocol.TRootUsage ||
		fl.kind == protocol.TRootCgroup || fl.kind == protocol.TRootOOM {
		return fl.fromCopyAgent(f)
	}
	if fl.kind == protocol.TTunnel {
		return fl.fromTunnelAgent(f)
	}
	switch f.Type {
	case protocol.TStarted:
		if fl.started {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "second started frame")
		}
		fl.started = true
	case protocol.TStdout, protocol.TStderr:
		fd := 1
		if f.Type == protocol.TStderr {
			fd = 2
		}
		fl.unread[fd] += len(f.Payload)
		if fl.unread[fd] > protocol.InitialWindow {
			return errdefs.Errorf(errdefs.ErrLimit, "%s overruns its window: %d bytes unacknowledged, window %d", f.Type, fl.unread[fd], protocol.InitialWindow)
		}
		fl.m.outputBytes(len(f.Payload))
	case protocol.TLaneAsk:
		if fl.laneAsked {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "second lane-ask frame")
		}
		fl.laneAsked = true
	case protocol.TLane: // an exec's stdout through the lane (the client checks the chunk)
		var ch protocol.LaneChunk
		if err := protocol.Decode(f, &ch); err != nil {
			return err
		}
		if fl.laneHeld++; fl.laneHeld > fl.lane {
			return errdefs.Errorf(errdefs.ErrLimit, "exec lane chunk overruns its window: %d chunks held, %d slots granted", fl.laneHeld, fl.lane)
		}
		fl.m.outputBytes(min(max(ch.Len, 0), protocol.LaneSlot))
	case protocol.TCredit:
		return fl.stdinCredit(f, "credit")
	case protocol.TExit:
		var x protocol.Exit
		if err := protocol.Decode(f, &x); err != nil {
			return err
		}
	case protocol.TError:
		var e protocol.Error
		if err := protocol.Decode(f, &e); err != nil {
			return err
		}
		if !fl.started && !fl.resumed { // the exec never ran
			fl.m.failed()
		}
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "unexpected %s frame on an exec stream", f.Type)
	}
	return nil
}

// fromCopyAgent checks an agent frame on a copy stream: a copy in takes
// the client's data (TStdin) and credits it like an exec's stdin; a copy
// out sends its data as TStdout within the same window as an exec's output.
// Either ends with TCopyDone or TError, and has no other frames. A watch's
// events are a copy out's data, and so are a root's OOM watch's. A root's
// release and its cgroup's limits have only their end; a root's usage
// one small data frame before it.
func (fl *flow) fromCopyAgent(f protocol.Frame) error {
	switch {
	case f.Type == protocol.TStdout && fl.kind == protocol.TRootUsage:
		if fl.unread[1] += len(f.Payload); fl.unread[1] > protocol.MaxRootUsageFrame {
			return errdefs.Errorf(errdefs.ErrLimit, "root usage answer of %d bytes, limit %d", fl.unread[1], protocol.MaxRootUsageFrame)
		}
	case f.Type == protocol.TStdout && (fl.kind == protocol.TCopyOut || fl.kind == protocol.TWatch || fl.kind == protocol.TRootOOM):
		if fl.lane > 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "copy-out data frame on a copy that takes the lane")
		}
		fl.unread[1] += len(f.Payload)
		if fl.unread[1] > protocol.InitialWindow {
			return errdefs.Errorf(errdefs.ErrLimit, "copy-out data overruns its window: %d bytes unacknowledged, window %d", fl.unread[1], protocol.InitialWindow)
		}
	case f.Type == protocol.TCredit && fl.kind == protocol.TCopyIn:
		var c protocol.Credit
		if err := protocol.Decode(f, &c); err != nil {
			return err
		}
		if c.Fd != 0 || c.Bytes <= 0 || c.Bytes > fl.stdin {
			return errdefs.Errorf(errdefs.ErrLimit, "copy-in credit of %d bytes for fd %d: %d bytes were sent", c.Bytes, c.Fd, fl.stdin)
		}
		fl.stdin -= c.Bytes
	case f.Type == protocol.TLane && fl.kind == protocol.TCopyOut:
		if fl.laneHeld++; fl.laneHeld > fl.lane {
			return errdefs.Errorf(errdefs.ErrLimit, "copy-out lane chunk overruns its window: %d chunks held, lane of %d slots", fl.laneHeld, fl.lane)
		}
	case f.Type == protocol.TLaneFree && fl.kind == protocol.TCopyIn:
		var lf protocol.LaneFree
		if err := protocol.Decode(f, &lf); err != nil {
			return err
		}
		if lf.Slots <= 0 || lf.Slots > fl.laneHeld {
			return errdefs.Errorf(errdefs.ErrLimit, "copy-in lane free of %d slots: %d chunks were sent", lf.Slots, fl.laneHeld)
		}
		fl.laneHeld -= lf.Slots
	case f.Type == protocol.TCopyDone:
		var d protocol.CopyDone
		if err := protocol.Decode(f, &d); err != nil {
			return err
		}
	case f.Type == protocol.TError:
		var e protocol.Error
		if err := protocol.Decode(f, &e); err != nil {
			return err
		}
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "unexpected %s frame on a %s stream", f.Type, fl.kind)
	}
	return nil
}

// fromTunnelAgent checks an agent frame on a tunnel stream: TStarted once,
// then the box's bytes as TStdout within the window (none after TEOF,
// which comes once), credit for no more of the client's bytes than were
// sent, and TExit or TError to end it.
func (fl *flow) fromTunnelAgent(f protocol.Frame) error {
	switch f.Type {
	case protocol.TStarted:
		if fl.started {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "second started frame on a tunnel stream")
		}
		fl.started = true
	case protocol.TStdout:
		if !fl.started || fl.eof {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel data before its started frame or after its eof")
		}
		fl.unread[1] += len(f.Payload)
		if fl.unread[1] > protocol.InitialWindow {
			return errdefs.Errorf(errdefs.ErrLimit, "tunnel data overruns its window: %d bytes unacknowledged, window %d", fl.unread[1], protocol.InitialWindow)
		}
	case protocol.TEOF:
		if !fl.started || fl.eof {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel eof before its started frame or a second one")
		}
		fl.eof = true
	case protocol.TCredit:
		return fl.stdinCredit(f, "tunnel credit")
	case protocol.TExit:
		var x protocol.Exit
		if err := protocol.Decode(f, &x); err != nil {
			return err
		}
	case protocol.TError:
		var e protocol.Error
		if err := protocol.Decode(f, &e); err != nil {
			return err
		}
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "unexpected %s frame on a tunnel stream", f.Type)
	}
	return nil
}

// fromClient accounts for a client frame on the stream. Clients are host
// processes of the same user, but their counts are clamped all the same.
func (fl *flow) fromClient(f protocol.Frame) {
	switch f.Type {
	case protocol.TCopyIn, protocol.TCopyOut:
		var req struct {
			Lane int `msgpack:"lane"`
		}
		if protocol.Decode(f, &req) == nil {
			fl.lane = max(req.Lane, 0)
		}
	case protocol.TLaneGrant:
		var g protocol.LaneGrant
		if protocol.Decode(f, &g) == nil {
			fl.lane = min(max(g.Slots, 0), protocol.MaxLaneSlots)
		}
	case protocol.TLane:
		fl.laneHeld++
	case protocol.TLaneFree:
		var lf protocol.LaneFree
		if protocol.Decode(f, &lf) == nil && lf.Slots > 0 {
			fl.laneHeld = max(fl.laneHeld-lf.Slots, 0)
		}
	case protocol.TStdin:
		fl.stdin += len(f.Payload)
		if fl.kind == protocol.TExec {
			fl.m.stdinBytes(len(f.Payload))
		}
	case protocol.TCredit:
		var c protocol.Credit
		if protocol.Decode(f, &c) == nil && (c.Fd == 1 || c.Fd == 2) && c.Bytes > 0 {
			fl.unread[c.Fd] = max(fl.unread[c.Fd]-c.Bytes, 0)
		}
	}
}

// violation stops the box because its agent broke the protocol. The agent
// cannot be trusted to power off, so the VMM is killed.
func (s *shim) violation(err error) {
	s.kill(fmt.Sprintf("agent protocol violation: %v", err))
}

// stdinCredit checks a credit the agent gives back for the client's stdin
// (fd 0): never more than was sent and not yet credited.
func (fl *flow) stdinCredit(f protocol.Frame, what string) error {
	var c protocol.Credit
	if err := protocol.Decode(f, &c); err != nil {
		return err
	}
	if c.Fd != 0 || c.Bytes <= 0 || c.Bytes > fl.stdin {
		return errdefs.Errorf(errdefs.ErrLimit, "%s of %d bytes for fd %d: %d bytes of stdin were sent", what, c.Bytes, c.Fd, fl.stdin)
	}
	fl.stdin -= c.Bytes
	return nil
}
