package boxlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// StatePaused: the box's VM was saved (devices and memory) into its
// directory and every process of the box ended; Resume, or any call that
// needs the box running, restores it as it was.
const StatePaused State = "paused"

// ErrStateIncompatible is in the error of a resume whose saved state no
// longer fits: QEMU, the guest kernel or initramfs, the agent or the
// machine's shape changed since the pause. The state is then discarded and
// the box is stopped with its disk, so Start boots it. errors.Is(err,
// errdefs.ErrUnsupported) holds for such an error too.
var ErrStateIncompatible = errors.New("saved state incompatible")

// stateError is a refused resume (ErrStateIncompatible).
type stateError struct{ msg string }

func (e *stateError) Error() string { return e.msg }
func (e *stateError) Is(target error) bool {
	return target == ErrStateIncompatible || target == errdefs.ErrUnsupported
}

// PauseInfo describes a paused box's saved state.
type PauseInfo struct {
	SavedAt    time.Time `json:"saved_at"`
	StateBytes int64     `json:"state_bytes"` // the state file's size on disk
	SaveMs     float64   `json:"save_ms"`     // VM stopped to state synced
}

// pauseTimeout bounds a pause: the shim saves the guest's memory to disk.
const pauseTimeout = 5*time.Minute + 30*time.Second

// Pause saves the running box (its devices, vCPUs and memory, its disks
// consistent with them) into its directory and ends its VMM, network stack
// and shim: a paused box holds no process and no host memory, and outlives
// every process (a new runtime resumes it by id or name). Pausing a paused
// box is a no-op; any other state but running is ErrInvalidState. A box
// with volumes cannot pause (ErrUnsupported: QEMU 7.2 cannot save its
// virtio-fs device). A host disk without room for the box's memory fails
// the pause (ErrLimit). A pause that fails leaves the box running.
//
// The box's streams end with the pause: running execs lose their client
// (a detachable one runs on, AttachExec reaches it after the resume), and
// TCP connections from inside the box to the outside break.
func (b *Box) Pause(ctx context.Context) (PauseInfo, error) {
	b.refresh()
	b.mu.Lock()
	switch b.state {
	case StatePaused:
		b.mu.Unlock()
		return b.pauseInfo(), nil
	case StateRunning:
	default:
		state := b.state
		b.mu.Unlock()
		return PauseInfo{}, errdefs.Errorf(errdefs.ErrInvalidState, "pause box %s: it is %s", b.rec.ID, state)
	}
	if b.pausing != nil {
		b.mu.Unlock()
		return PauseInfo{}, errdefs.Errorf(errdefs.ErrInvalidState, "pause box %s: a pause is under way", b.rec.ID)
	}
	c, shimCh := b.conn, b.shimCh
	pausing := make(chan struct{})
	b.pausing = pausing
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.pausing = nil
		b.mu.Unlock()
		close(pausing)
	}()
	var other *proc
	if shimCh == nil {
		other = b.lockHolder()
		defer func() {
			if other != nil {
				other.close()
			}
		}()
	}
	var res protocol.Paused
	if err := c.requestWithin(ctx, protocol.TPause, nil, &res, pauseTimeout); err != nil {
		return PauseInfo{}, fmt.Errorf("pause: %w", err)
	}
	// The shim ends the box now: wait for it, so that the box has no
	// process when Pause returns.
	var err error
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		err = errdefs.Errorf(errdefs.ErrTimeout, "pause box %s: its shim did not finish within 30s", b.rec.ID)
	}
	c.Close()
	if shimCh != nil {
		select {
		case <-shimCh:
		case <-time.After(15 * time.Second):
			b.mu.Lock()
			if b.shim != nil {
				b.shim.Process.Kill()
			}
			b.mu.Unlock()
			<-shimCh
		}
	}
	if other != nil && err == nil && !other.wait(15*time.Second) {
		err = errdefs.Errorf(errdefs.ErrTimeout, "pause box %s: its shim (pid %d) did not exit within 15s", b.rec.ID, other.pid)
	}
	b.mu.Lock()
	if b.death != nil {
		b.death.Close()
		b.death = nil
	}
	b.shim, b.shimCh, b.conn = nil, nil, nil
	b.state = b.restingState()
	b.pausedHere = b.state == StatePaused
	b.mu.Unlock()
	if err != nil {
		return PauseInfo{}, err
	}
	return PauseInfo{SavedAt: time.Now().UTC(), StateBytes: res.StateBytes, SaveMs: res.SaveMs}, nil
}

// Resume restores a paused box: the same machine (its processes, memory,
// clock source, hostname and boot id), its network stack and published
// ports started anew. Resuming a running box is a no-op; a box in another
// state is ErrInvalidState. A saved state that no longer fits is refused
// with ErrStateIncompatible, and the box is then stopped with its disk.
// Exec, Run, copies, sessions, AttachExec and Metrics resume a paused box
// themselves.
func (b *Box) Resume(ctx context.Context) error {
	b.refresh()
	switch s := b.State(); s {
	case StateRunning:
		return nil
	case StatePaused, StateStarting:
		if err := b.Start(ctx); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		return nil
	default:
		return errdefs.Errorf(errdefs.ErrInvalidState, "resume box %s: it is %s, not paused", b.rec.ID, s)
	}
}

// awaitPause waits for a pause of the box under way in this process, so
// that an operation that needs the box running resumes it after, instead of
// using the connection the pause ends.
func (b *Box) awaitPause(ctx context.Context) error {
	return b.await(ctx, func() chan struct{} { return b.pausing }, "its pause under way")
}

// await waits until the channel of a step under way (read under b.mu; nil
// when none is) is closed, or ctx ends.
func (b *Box) await(ctx context.Context, step func() chan struct{}, what string) error {
	b.mu.Lock()
	ch := step()
	b.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "box %s: waiting for %s: %v", b.rec.ID, what, ctx.Err())
	}
}

// paused reports whether the box directory holds a pause's state.
func (b *Box) paused() bool {
	_, err := os.Lstat(b.path(shimapi.PausedFile))
	return err == nil
}

// pauseInfo reads the pause record; zero when there is none.
func (b *Box) pauseInfo() PauseInfo {
	var p shimapi.Paused
	if readJSON(b.path(shimapi.PausedFile), &p) != nil {
		return PauseInfo{}
	}
	return PauseInfo{SavedAt: p.SavedAt, StateBytes: p.StateBytes, SaveMs: p.SaveMs}
}

// discardPause drops a paused box's saved state, for Stop: the box is then
// stopped, its disk as the pause left it (consistent: QEMU flushed it).
func (b *Box) discardPause() error {
	if p := b.lockHolder(); p != nil { // a resume under way in another process
		p.close()
		return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is being resumed", b.rec.ID)
	}
	os.Remove(b.path(shimapi.PausedFile))
	os.Remove(b.path(shimapi.StateFile))
	return writeJSON(b.path(shimapi.ExitFile), shimapi.Exit{Reason: "stopped while paused (its saved state was discarded)", At: time.Now().UTC()})
}

// WithAutoPause makes the box pause itself (as Pause: its memory saved, no
// process left) after d with no activity, and the next call resumes it
// transparently, as E2B's auto-pause. Activity, as the box's shim sees it:
// an exec, copy or attach opening, and any frame either way on an open
// stream. A stream that is open holds the box awake (a running command, a
// copy), except a detachable exec's (a session's interpreter, an
// interactive shell, Command.Detachable), which holds it only while it is
// answering: from the client's last input until the process next writes
// output, so an idle session or shell lets the box sleep, and a cell that
// computes silently does not. A detachable exec runs on across the pause
// and is attached again after it (sessions do so themselves). Default 0:
// never. d is at least 1 s and at most 30 days; a box with volumes cannot
// pause, so it cannot have it.
func WithAutoPause(d time.Duration) BoxOption {
	return func(c *BoxConfig) error { c.AutoPause = d; return nil }
}

// validateAutoPause checks WithAutoPause.
func (c *BoxConfig) validateAutoPause(bad func(string, ...any) error) error {
	switch {
	case c.AutoPause == 0:
		return nil
	case c.AutoPause < abi.MinAutoPause || c.AutoPause > abi.MaxAutoPause:
		return bad("auto pause (auto_pause_secs) %s is outside %s..%s", c.AutoPause, abi.MinAutoPause, abi.MaxAutoPause)
	case len(c.Volumes) > 0:
		return bad("auto pause (auto_pause_secs) and volumes: a box with volumes cannot pause (QEMU 7.2 cannot save its virtio-fs device)")
	}
	return nil
}

// holdAwake is the session.BusyFunc of the box's sessions: it counts the
// cells and commands under way and tells the box's shim whether any is
// (protocol.THold), so that an auto-pause waits for a cell that computes
// silently. A connection made later (a resume) is told in attach.
func (b *Box) holdAwake(on bool) {
	b.holdMu.Lock()
	defer b.holdMu.Unlock()
	b.mu.Lock()
	if on {
		b.holds++
	} else if b.holds > 0 {
		b.holds--
	}
	c, held := b.conn, b.holds > 0
	b.mu.Unlock()
	if c != nil {
		c.send(protocol.THold, 0, protocol.Hold{On: held}) // a shim that is gone holds nothing
	}
}
