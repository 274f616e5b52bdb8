package boxlite

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// The running-memory cap (WithRunningMemoryCapMiB) bounds the guest memory
// that the running boxes of one runtime hold: a start or resume that would
// pass it first pauses the least recently used running boxes of that
// runtime, those with nothing under way (no stream open, no session call),
// until the box fits (a session's interpreter waiting for its next cell is
// idle, as for auto-pause). A paused box holds no memory and resumes on its next
// call, so a runtime can keep more boxes live than its memory holds.

// touch records a use of the box (running: an exec, a copy, a session call).
func (b *Box) touch() { b.lastUsed.Store(time.Now().UnixNano()) }

// idle: nothing is under way in the box that a pause would cut.
func (b *Box) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == StateRunning && b.holds == 0 && b.pausing == nil && b.conn != nil && !b.conn.busy()
}

// makeRoom pauses least recently used running boxes of the runtime until
// the box fits under the cap along with those running and those starting
// that were admitted; memMu makes each start's count and pauses one step.
func (r *Runtime) makeRoom(ctx context.Context, b *Box) error {
	if r.memCap == 0 || b.inPool.Load() {
		return nil
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	need := int64(b.rec.Config.MemoryMiB)
	if need > r.memCap {
		return errdefs.Errorf(errdefs.ErrLimit, "start box %s: its %d MiB of memory exceed the runtime's running-memory cap of %d MiB", b.rec.ID, need, r.memCap)
	}
	b.capAdmitted.Store(false)
	tried := map[*Box]bool{}
	for {
		var held int64
		var victims []*Box
		r.mu.Lock()
		boxes := make([]*Box, 0, len(r.boxes))
		for _, o := range r.boxes {
			boxes = append(boxes, o)
		}
		r.mu.Unlock()
		for _, o := range boxes {
			if o == b {
				continue
			}
			switch o.State() {
			case StateStarting:
				if o.capAdmitted.Load() { // a start waiting behind this one is not counted
					held += int64(o.rec.Config.MemoryMiB)
				}
			case StateRunning, StateStopping:
				held += int64(o.rec.Config.MemoryMiB)
				if !tried[o] && o.idle() {
					victims = append(victims, o)
				}
			}
		}
		if held+need <= r.memCap {
			b.capAdmitted.Store(true)
			return nil
		}
		if len(victims) == 0 {
			return errdefs.Errorf(errdefs.ErrLimit, "start box %s: running boxes hold %d MiB of the runtime's running-memory cap of %d MiB, it needs %d MiB, and none of them is idle to pause", b.rec.ID, held, r.memCap, need)
		}
		sort.Slice(victims, func(i, j int) bool { return victims[i].lastUsed.Load() < victims[j].lastUsed.Load() })
		v := victims[0]
		tried[v] = true
		if _, err := v.Pause(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("start box %s: pausing box %s to make room under the running-memory cap: %w", b.rec.ID, v.rec.ID, err)
			}
			continue // it cannot pause (volumes) or stopped meanwhile: the next one
		}
	}
}

// WithRunningMemoryCapMiB caps the guest memory the running boxes of this
// runtime hold together: a start or resume that would pass it pauses the
// least recently used idle running boxes first (see Box.Pause), and fails
// with ErrLimit when that cannot make room. Only boxes this runtime has a
// handle on are counted. Default 0: no cap.
func WithRunningMemoryCapMiB(mib int64) Option {
	return func(o *runtimeOptions) error {
		if mib < 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "running-memory cap %d MiB is negative", mib)
		}
		o.memCap = mib
		return nil
	}
}
