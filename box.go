package boxlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/safetext"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// State is where a box is in its lifecycle.
type State string

const (
	// StateConfigured: created (registered, image in the store) but never
	// started; the first Start, or the first operation that needs the VM,
	// boots it.
	StateConfigured State = "configured"
	StateStopped    State = "stopped"  // not running; its disk is kept
	StateStarting   State = "starting" // shim and VM booting
	StateRunning    State = "running"  // agent ready, accepting execs
	StateStopping   State = "stopping" // shutdown requested
	StateRemoved    State = "removed"  // gone; the handle is dead
)

// transitions lists the legal state changes; setState enforces them.
var transitions = map[State][]State{
	StateConfigured: {StateStarting, StateRunning, StateRemoved},
	StateStopped:    {StateStarting, StateRunning, StateRemoved},
	StatePaused:     {StateStarting, StateRunning, StateStopped, StateRemoved},
	StateStarting:   {StateRunning, StateStopped, StatePaused},
	StateRunning:    {StateStopping, StateStopped},
	StateStopping:   {StateStopped},
}

// Box is a handle on one box. Handles are shared per runtime and safe for
// concurrent use.
type Box struct {
	rt  *Runtime
	rec record
	dir string

	mu     sync.Mutex
	img    *image.Image // cached by image()
	state  State
	conn   *conn
	info   protocol.Info
	shim   *exec.Cmd // set when this process started the shim
	shimCh chan struct{}
	death  *os.File // write end of the shim's parent-death pipe; nil when detached
	// started is closed when the start under way (state starting) ends.
	started chan struct{}
	// pausing is closed when the pause under way (Pause) ends; nil when
	// none is. pausedHere: this process paused the box, which is not
	// detached, so Runtime.Close stops it as it would have the running box.
	pausing    chan struct{}
	pausedHere bool
	// holds counts this process's session calls under way (holdAwake);
	// holdMu orders their messages to the shim.
	holds  int
	holdMu sync.Mutex
	// crashed: the shim's connection dropped with no exit record (the shim
	// was killed); atomic, as stoppedError runs with and without b.mu.
	crashed atomic.Bool
	// removing is closed when the removal of an auto-remove box whose run
	// ended on its own (autoRemove) is over; nil when none began.
	// removedWhy is why that run ended, for every later call.
	removing   chan struct{}
	removedWhy string
	// lastUsed is when a call last needed the box running (unix ns): the
	// running-memory cap pauses the least recently used first.
	lastUsed atomic.Int64
	// capAdmitted: its start under way fits under the running-memory cap.
	capAdmitted atomic.Bool
	// handedOver: the box came from a warm pool (pool.go) in this process.
	handedOver bool
	// inPool: a warm pool's box, not handed over; its start makes no room
	// under the running-memory cap (the pools have their own budget).
	inPool atomic.Bool
}

// BoxInfo describes a box.
type BoxInfo struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Image     string    `json:"image"`
	State     State     `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	Config    BoxConfig `json:"config"`
	Dir       string    `json:"dir"`
	LastExit  string    `json:"last_exit,omitempty"` // why the box last stopped
	// Faulted: its last run ended in a fault (see shimapi.Exit), so Exec
	// does not start it; Start does.
	Faulted bool            `json:"faulted,omitempty"`
	Runtime *BoxRuntimeInfo `json:"runtime,omitempty"`
	// Paused describes the saved state of a paused box.
	Paused *PauseInfo `json:"paused,omitempty"`
	// Health is its health check's state (HealthNone without one or when
	// not running); Info asks the shim, within healthRequestTimeout.
	Health HealthStatus `json:"health"`
}

// BoxRuntimeInfo is what a running box reports about its VM.
type BoxRuntimeInfo struct {
	Accel         string  `json:"accel"`
	AccelReason   string  `json:"accel_reason"`
	Kernel        string  `json:"kernel"`
	BootMs        float64 `json:"boot_ms"`         // host: VMM start to agent ready
	GuestKernelMs float64 `json:"guest_kernel_ms"` // guest clock: boot to agent start
	GuestReadyMs  float64 `json:"guest_ready_ms"`  // guest clock: boot to ready
	ShimPid       int     `json:"shim_pid"`
	VMMPid        int     `json:"vmm_pid"`
	// Start is how the VM came up: "boot", "template" (restored from the
	// template of its shape: a warm start), "new-template" (the box made
	// that template first) or "pool" (handed over from a warm pool, where
	// it was restored from its template); StartNote says why a box that
	// could have started from a template booted.
	Start     string `json:"start,omitempty"`
	StartNote string `json:"start_note,omitempty"`
	// Warnings name what weakens the box's isolation (TCG, a confinement
	// layer the host could not give its VMM); see docs/SECURITY.md.
	Warnings []string `json:"warnings,omitempty"`
	// Network is the box's network with its published ports as bound;
	// nil when the network is disabled.
	Network *NetworkInfo `json:"network,omitempty"`
	// StartedAt is when the VM became ready (zero from an older shim).
	StartedAt time.Time `json:"started_at,omitzero"`
	// LastActivityAt is the later of StartedAt and the last exec, copy or
	// session call (its opening or its last frame) this process saw.
	LastActivityAt time.Time `json:"last_activity_at,omitzero"`
}

func (b *Box) ID() string   { return b.rec.ID }
func (b *Box) Name() string { return b.rec.Config.Name }

// setState moves the box along its lifecycle; callers hold b.mu.
func (b *Box) setState(to State) error {
	for _, ok := range transitions[b.state] {
		if ok == to {
			b.state = to
			return nil
		}
	}
	return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is %s, cannot become %s", b.rec.ID, b.state, to)
}

// State returns the box's current state.
func (b *Box) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Info describes the box.
func (b *Box) Info() BoxInfo {
	bi := b.info0()
	// A failed question leaves HealthNone: info never fails.
	bi.Health, _ = b.Health(context.Background())
	return bi
}

func (b *Box) info0() BoxInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	bi := BoxInfo{ID: b.rec.ID, Name: b.rec.Config.Name, Image: b.rec.Config.Image, State: b.state,
		CreatedAt: b.rec.CreatedAt, Config: b.rec.Config, Dir: b.dir}
	if b.state == StateStopped {
		e := b.exitRecord()
		bi.LastExit, bi.Faulted = e.Reason, e.Fault || b.crashed.Load()
	}
	if b.state == StatePaused {
		p := b.pauseInfo()
		bi.Paused = &p
	}
	if b.state == StateStopped || b.state == StateConfigured || b.state == StatePaused {
		// A shim that holds the box's lock without a socket yet is booting
		// it (started by another process, or left by an interrupted start).
		if p := b.lockHolder(); p != nil {
			if !p.ended {
				bi.State, bi.LastExit, bi.Faulted, bi.Paused = StateStarting, "", false, nil
			}
			p.close()
		}
	}
	if b.state == StateRunning {
		h := b.info.Hello
		bi.Runtime = &BoxRuntimeInfo{Accel: b.info.Accel, AccelReason: b.info.AccelReason, Kernel: h.Kernel,
			BootMs: b.info.BootMs, GuestKernelMs: h.KernelMs, GuestReadyMs: h.ReadyMs, ShimPid: b.info.ShimPid, VMMPid: b.info.VMMPid,
			Warnings: b.info.Warnings, Network: b.info.Network, Start: b.info.Start, StartNote: b.info.StartNote}
		if b.handedOver {
			bi.Runtime.Start = "pool"
		}
		if ms := b.info.StartedAtMs; ms > 0 {
			bi.Runtime.StartedAt = time.UnixMilli(ms).UTC()
		}
		bi.Runtime.LastActivityAt = bi.Runtime.StartedAt
		if c := b.conn; c != nil {
			if ns := c.active.Load(); ns > 0 && time.Unix(0, ns).After(bi.Runtime.LastActivityAt) {
				bi.Runtime.LastActivityAt = time.Unix(0, ns).UTC()
			}
		}
	}
	return bi
}

// exitRecord is why the box's last run ended (zero when none is recorded).
func (b *Box) exitRecord() shimapi.Exit {
	var e shimapi.Exit
	if readJSON(b.path(shimapi.ExitFile), &e) != nil {
		return shimapi.Exit{}
	}
	e.Reason = safetext.Text(e.Reason) // it may quote the guest's console
	return e
}

func (b *Box) lastExit() string { return b.exitRecord().Reason }

// faulted: the box's last run ended in a failure (its VMM, agent or shim),
// not on request; such a box is started again only by Start.
func (b *Box) faulted() bool { return b.crashed.Load() || b.exitRecord().Fault }

// restingState is the state of a box that no shim runs: paused while it
// holds a pause's state, else configured until a start has made its disk
// or left an exit record, stopped after.
func (b *Box) restingState() State {
	if b.paused() {
		return StatePaused
	}
	for _, f := range []string{shimapi.DiskFile, shimapi.ExitFile} {
		if _, err := os.Lstat(b.path(f)); err == nil {
			return StateStopped
		}
	}
	return StateConfigured
}

func (b *Box) path(name string) string { return filepath.Join(b.dir, name) }

// refresh attaches to a box started by another process (or notices that the
// shim is gone).
func (b *Box) refresh() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != StateStopped && b.state != StateConfigured && b.state != StatePaused {
		return
	}
	c, err := dialShim(b.path(shimapi.SocketFile), b.stoppedError)
	if err != nil {
		// Another process may have paused it, or resumed it and stopped
		// it since (the rest of the resting states are this process's own
		// view: a failed first start stays stopped).
		if rs := b.restingState(); rs == StatePaused || b.state == StatePaused {
			b.state = rs
		}
		return
	}
	var info protocol.Info
	if err := c.request(protocol.TInfo, nil, &info); err != nil {
		c.Close()
		return
	}
	b.attach(c, info)
	b.setState(StateRunning)
	b.crashed.Store(false)
}

// attach adopts a shim connection; when it drops, the box is stopped.
func (b *Box) attach(c *conn, info protocol.Info) {
	b.conn, b.info = c, info
	if b.holds > 0 { // a session call under way resumed the box (holdAwake)
		c.send(protocol.THold, 0, protocol.Hold{On: true})
	}
	go func() {
		<-c.done
		defer close(c.noted)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.conn != c || b.state == StateStopping {
			return // Stop is handling it
		}
		// The shim went away on its own (VM crashed or was killed), or
		// paused the box (for another handle or process).
		b.conn, b.state = nil, StateStopped
		if b.paused() {
			b.state = StatePaused
		} else if b.lastExit() == "" {
			b.crashed.Store(true)
		}
		if b.death != nil && b.state == StatePaused {
			// Paused by its shim (auto-pause) while this process owns
			// it: Runtime.Close stops it, as one paused here.
			b.pausedHere = true
			b.death.Close()
		} else if b.death != nil {
			// The shim stops the box, and says why when told so on the pipe.
			why := b.stopReason() // the shim's exit record, written before it let go
			if err := c.brokenBy(); err != nil {
				b.death.Write([]byte(err.Error()))
				why = err.Error()
			}
			b.death.Close()
			if b.rec.Config.AutoRemove {
				// Its creator removes it, as its Stop would have: nothing
				// starts it again meanwhile (running and Start wait). Why is
				// read now: the shim, told its creator let go, may remove the
				// directory with its exit record first.
				b.removing = make(chan struct{})
				go b.autoRemove(b.shimCh, b.removing, why)
			}
		}
		b.shim, b.shimCh, b.death = nil, nil, nil
	}()
}

// stoppedError explains why a box is not running, for the next caller.
func (b *Box) stoppedError() error {
	if b.paused() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is paused (its streams ended with the pause; a new call resumes it)", b.rec.ID)
	}
	if why := b.stopReason(); why != "" {
		return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is stopped (%s)", b.rec.ID, why)
	}
	return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is stopped", b.rec.ID)
}

// stopReason is why the box's last run ended, "" when nothing says.
func (b *Box) stopReason() string {
	if why := b.lastExit(); why != "" {
		return why
	}
	if b.crashed.Load() {
		return "its shim exited without saying why"
	}
	return ""
}

// Start boots a configured or stopped box. Its disk keeps what earlier runs
// wrote. Starting a running box is a no-op; a start under way in this
// process is waited for. A box that another process started (or is
// starting) is joined instead: one box never gets two VMs (its shim holds a
// lock on the box directory).
func (b *Box) Start(ctx context.Context) error {
	if err := b.awaitRemoval(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if b.State() == StateRemoved {
		return b.removedError("start")
	}
	b.refresh()
	b.mu.Lock()
	waited := false
	for b.state == StateStarting {
		ch := b.started
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return errdefs.Errorf(errdefs.ErrTimeout, "start box %s: waiting for its start under way: %v", b.rec.ID, ctx.Err())
		}
		b.mu.Lock()
		waited = true
	}
	if b.state == StateRunning {
		b.mu.Unlock()
		return nil
	}
	if waited { // one boot attempt for all who asked at once, not one each
		b.mu.Unlock()
		return fmt.Errorf("start box %s: the start under way failed: %w", b.rec.ID, b.stoppedError())
	}
	prev := b.state
	if err := b.setState(StateStarting); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start: %w", err)
	}
	b.started = make(chan struct{})
	b.crashed.Store(false)
	b.mu.Unlock()
	if err := b.rt.makeRoom(ctx, b); err != nil {
		b.mu.Lock()
		b.state = prev // it never began
		close(b.started)
		b.mu.Unlock()
		return err
	}
	b.touch()
	c, info, err := b.boot(ctx)
	for tries := 0; errors.Is(err, errShimRunning) && tries < 3; tries++ {
		if c, info, err = b.join(ctx); errors.Is(err, errShimGone) {
			// The shim that held the box was ending (a box that just
			// stopped), or another process's start failed: start anew.
			c, info, err = b.boot(ctx)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer close(b.started)
	if err != nil {
		b.rt.counters.failed.Add(1)
		if b.paused() { // a resume that failed keeps the state (Stop discards it)
			b.setState(StatePaused)
		} else {
			b.setState(StateStopped) // it has tried: Info's last_exit says why it failed
		}
		return err
	}
	b.attach(c, info)
	return b.setState(StateRunning)
}

// Stop shuts the box down: the agent syncs and unmounts, the VM powers off,
// the shim exits. Stopping a stopped box is a no-op.
func (b *Box) Stop(ctx context.Context) error {
	b.refresh() // another handle or process may have stopped it
	b.mu.Lock()
	if b.state == StatePaused {
		// Its saved state is dropped; its disk is as the pause left it.
		err := b.discardPause()
		if err == nil {
			b.state = StateStopped
		}
		auto := b.rec.Config.AutoRemove
		b.mu.Unlock()
		if err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		if auto {
			return b.Remove(ctx, false)
		}
		return nil
	}
	if b.state == StateStopped || b.state == StateRemoved || b.state == StateConfigured {
		removed := b.state == StateRemoved
		b.mu.Unlock()
		if !removed {
			// A shim may be booting it with no socket yet (another
			// process's start, or one that was interrupted): end it.
			ended, err := b.endBootingShim()
			if err != nil {
				return fmt.Errorf("stop: %w", err)
			}
			if ended {
				b.noteEnded("stopped while it was starting")
			}
		}
		return nil // idempotent, as BoxLite's; a configured box never ran, and an auto-remove one stays
	}
	if err := b.setState(StateStopping); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("stop: %w", err)
	}
	c, shimCh := b.conn, b.shimCh
	b.mu.Unlock()
	// A shim another process started is not ours to reap: hold it, so that
	// Stop returns once it has ended, not only its connection (until then
	// it holds the box's lock, and the box would read as starting).
	var other *proc
	if shimCh == nil {
		other = b.lockHolder()
	}
	var err error
	if c != nil {
		c.sendFrame(protocol.Frame{Type: protocol.TShutdown})
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			err = errdefs.Errorf(errdefs.ErrTimeout, "stop box %s: shim did not finish within 30s", b.rec.ID)
		case <-ctx.Done():
			err = errdefs.Errorf(errdefs.ErrTimeout, "stop box %s: %v", b.rec.ID, ctx.Err())
		}
		c.Close()
	}
	if shimCh != nil {
		select {
		case <-shimCh:
		case <-time.After(15 * time.Second):
			b.shim.Process.Kill()
			<-shimCh
		}
	}
	if other != nil {
		if err == nil && !other.wait(15*time.Second) {
			err = errdefs.Errorf(errdefs.ErrTimeout, "stop box %s: its shim (pid %d) did not exit within 15s", b.rec.ID, other.pid)
		}
		other.close()
	}
	b.mu.Lock()
	if b.death != nil {
		b.death.Close()
		b.death = nil
	}
	b.shim, b.shimCh, b.conn = nil, nil, nil
	b.state = StateStopped
	auto := b.rec.Config.AutoRemove
	b.mu.Unlock()
	if auto && err == nil {
		return b.Remove(ctx, false)
	}
	return err
}

// release is Runtime.Close's per-box step: stop what this process started,
// unless it is detached (it outlives its creator).
func (b *Box) release() {
	b.awaitRemoval(context.Background()) // bounded: autoRemove's own deadlines
	b.mu.Lock()
	ours := (b.shim != nil || b.state == StatePaused && b.pausedHere) && !b.rec.Config.Detach
	c := b.conn
	b.mu.Unlock()
	if ours {
		b.Stop(context.Background())
	} else if c != nil {
		c.Close()
	}
}

// Remove deletes the box and its disk. A running box needs force.
func (b *Box) Remove(ctx context.Context, force bool) error {
	if err := b.awaitRemoval(ctx); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	b.mu.Lock()
	auto := b.state == StateRemoved && b.removedWhy != ""
	b.mu.Unlock()
	if auto {
		return nil // its run ended and auto_remove removed it, as asked
	}
	return b.remove(ctx, force)
}

func (b *Box) remove(ctx context.Context, force bool) error {
	b.refresh()
	if s := b.State(); s != StateStopped && s != StateConfigured && s != StatePaused {
		if !force {
			return errdefs.Errorf(errdefs.ErrInvalidState, "remove box %s: it is %s (stop it first, or force)", b.rec.ID, s)
		}
		if err := b.Stop(ctx); err != nil {
			return err
		}
		if b.State() == StateRemoved {
			return nil // an auto-remove box went with its stop
		}
	}
	// A shim booting it, with no socket yet, is ended with force, and
	// refused without: the box's directory is never removed under it. (A
	// shim that has just stopped the box is given a moment to exit.)
	if p := b.lockHolder(); p != nil {
		switch {
		case p.wait(2 * time.Second):
			p.close()
		case !force:
			p.close()
			return errdefs.Errorf(errdefs.ErrInvalidState, "remove box %s: it is starting (its shim, pid %d, holds its lock); stop it first, or force", b.rec.ID, p.pid)
		default:
			if err := endShim(b.rec.ID, p); err != nil {
				return fmt.Errorf("remove: %w", err)
			}
		}
	}
	unlock, err := b.rt.lock()
	if err != nil {
		return err
	}
	defer unlock()
	b.mu.Lock()
	err = b.setState(StateRemoved)
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	b.rt.forget(b)
	return b.removeFiles()
}

// removeFiles deletes the box directory, and the VMM cgroup a killed shim
// could not remove (the jail removes it whenever the shim lives to): the
// shim binary's sweep does that, so the library never links the jail.
func (b *Box) removeFiles() error {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	// Best effort, as before: a group that still holds processes stays,
	// and the next removal of a box of that id sweeps again.
	exec.CommandContext(ctx, b.rt.assets.shim(), shimapi.SweepCommand, b.rec.ID).Run()
	return os.RemoveAll(b.dir)
}

// sweepTimeout bounds boxlite-shim sweep: a few rmdirs.
const sweepTimeout = 10 * time.Second
