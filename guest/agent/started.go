//go:build linux

package agent

import (
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// startedHold is how long the Started frame of an exec waits for
// company: the exec's first other frame (output, credit, its exit) takes it
// along in the same write. A process that exits at once (`true`, most
// commands under emulation) then costs the channel one write for Started
// and Exit, not two, and the host one wake-up; a quiet long-running one
// reports its pid this much later.
const startedHold = 20 * time.Millisecond

// announce sends the exec's Started frame, held back for startedHold
// unless another frame of the stream comes first (flushStartedLocked). A
// detachable exec sends it at once: its stream may change (attach).
func (e *execution) announce(f protocol.Frame) {
	if e.detachID != "" {
		e.send(f)
		return
	}
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.over.Load() {
		return
	}
	f.Stream = e.id
	e.started = &f
	e.startedTimer = time.AfterFunc(startedHold, func() {
		e.s.wmu.Lock()
		defer e.s.wmu.Unlock()
		e.flushStartedLocked()
	})
}

// flushStartedLocked writes the held Started frame, if any (s.wmu held).
func (e *execution) flushStartedLocked() {
	f := e.takeStartedLocked()
	if f != nil && !e.over.Load() && !e.gone {
		_ = e.s.writeLocked(*f)
	}
}

// takeStartedLocked returns the held Started frame and forgets it (s.wmu held).
func (e *execution) takeStartedLocked() *protocol.Frame {
	f := e.started
	if f != nil {
		e.started = nil
		e.startedTimer.Stop()
	}
	return f
}
