package core

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/image"
	"github.com/boxlite/boxlite/protocol"
	"github.com/boxlite/boxlite/safetext"
	"github.com/boxlite/boxlite/shimapi"
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
	StateStarting:   {StateRunning, StateStopped},
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
	// crashed: the shim's connection dropped with no exit record (the shim
	// was killed); atomic, as stoppedError runs with and without b.mu.
	crashed atomic.Bool
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
	// template of its shape: a warm start) or "new-template" (the box made
	// that template first); StartNote says why a box that could have
	// started from a template booted.
	Start     string `json:"start,omitempty"`
	StartNote string `json:"start_note,omitempty"`
	// Warnings name what weakens the box's isolation (TCG, a confinement
	// layer the host could not give its VMM); see docs/SECURITY.md.
	Warnings []string `json:"warnings,omitempty"`
	// Network is the box's network with its published ports as bound;
	// nil when the network is disabled.
	Network *NetworkInfo `json:"network,omitempty"`
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
	b.mu.Lock()
	defer b.mu.Unlock()
	bi := BoxInfo{ID: b.rec.ID, Name: b.rec.Config.Name, Image: b.rec.Config.Image, State: b.state,
		CreatedAt: b.rec.CreatedAt, Config: b.rec.Config, Dir: b.dir}
	if b.state == StateStopped {
		e := b.exitRecord()
		bi.LastExit, bi.Faulted = e.Reason, e.Fault || b.crashed.Load()
	}
	if b.state == StateStopped || b.state == StateConfigured {
		// A shim that holds the box's lock without a socket yet is booting
		// it (started by another process, or left by an interrupted start).
		if p := b.lockHolder(); p != nil {
			p.close()
			bi.State, bi.LastExit, bi.Faulted = StateStarting, "", false
		}
	}
	if b.state == StateRunning {
		h := b.info.Hello
		bi.Runtime = &BoxRuntimeInfo{Accel: b.info.Accel, AccelReason: b.info.AccelReason, Kernel: h.Kernel,
			BootMs: b.info.BootMs, GuestKernelMs: h.KernelMs, GuestReadyMs: h.ReadyMs, ShimPid: b.info.ShimPid, VMMPid: b.info.VMMPid,
			Warnings: b.info.Warnings, Network: b.info.Network, Start: b.info.Start, StartNote: b.info.StartNote}
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

// restingState is the state of a box that no shim runs: configured until a
// start has made its disk or left an exit record, stopped after.
func (b *Box) restingState() State {
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
	if b.state != StateStopped && b.state != StateConfigured {
		return
	}
	c, err := dialShim(b.path(shimapi.SocketFile), b.stoppedError)
	if err != nil {
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
	go func() {
		<-c.done
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.conn != c || b.state == StateStopping {
			return // Stop is handling it
		}
		// The shim went away on its own (VM crashed or was killed).
		b.conn, b.state = nil, StateStopped
		if b.lastExit() == "" {
			b.crashed.Store(true)
		}
		if b.death != nil {
			// The shim stops the box, and says why when told so on the pipe.
			if err := c.brokenBy(); err != nil {
				b.death.Write([]byte(err.Error()))
			}
			b.death.Close()
		}
		b.shim, b.shimCh, b.death = nil, nil, nil
	}()
}

// stoppedError explains why a box is not running, for the next caller.
func (b *Box) stoppedError() error {
	if why := b.lastExit(); why != "" {
		return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is stopped (%s)", b.rec.ID, why)
	}
	if b.crashed.Load() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is stopped (its shim exited without saying why)", b.rec.ID)
	}
	return errdefs.Errorf(errdefs.ErrInvalidState, "box %s is stopped", b.rec.ID)
}

// Start boots a configured or stopped box. Its disk keeps what earlier runs
// wrote. Starting a running box is a no-op; a start under way in this
// process is waited for. A box that another process started (or is
// starting) is joined instead: one box never gets two VMs (its shim holds a
// lock on the box directory).
func (b *Box) Start(ctx context.Context) error {
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
	if err := b.setState(StateStarting); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start: %w", err)
	}
	b.started = make(chan struct{})
	b.crashed.Store(false)
	b.mu.Unlock()
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
		b.setState(StateStopped) // it has tried: Info's last_exit says why it failed
		return err
	}
	b.attach(c, info)
	return b.setState(StateRunning)
}

// running returns the connection to the box's VM for op, starting a
// configured or stopped box first (as BoxLite's exec does), unless its last
// run ended in a fault (a crashed VMM, a protocol violation): that box only
// says why until Start is called, so a failing box is not rebooted in a loop.
func (b *Box) running(ctx context.Context, op string) (*conn, protocol.Info, error) {
	for tried := false; ; tried = true {
		b.mu.Lock()
		c, state, info := b.conn, b.state, b.info
		b.mu.Unlock()
		switch {
		case state == StateRunning && c != nil:
			return c, info, nil
		case state == StateStopped && b.faulted():
			// Not restarted behind the caller's back: say what ended it.
			return nil, info, fmt.Errorf("%s: %w; Start boots it again", op, b.stoppedError())
		case (state == StateConfigured || state == StateStopped || state == StateStarting) && !tried:
			if err := b.Start(ctx); err != nil {
				return nil, info, fmt.Errorf("%s: %w", op, err)
			}
		case state == StateStopped:
			return nil, info, fmt.Errorf("%s: %w", op, b.stoppedError()) // it stopped again at once
		default:
			return nil, info, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is %s", op, b.rec.ID, state)
		}
	}
}

// errShimRunning: the box's shim found another shim running the box.
var errShimRunning = errors.New("another shim runs the box")

// errShimGone: the shim that held the box when its start began has ended
// without serving it.
var errShimGone = errors.New("the box's other shim ended")

// join waits for the start of the box by another process to finish, and
// connects to its shim.
func (b *Box) join(ctx context.Context) (*conn, protocol.Info, error) {
	deadline := time.Now().Add(b.rec.Config.BootTimeout*shimapi.BootWallFactor + 15*time.Second)
	for {
		c, err := dialShim(b.path(shimapi.SocketFile), b.stoppedError)
		if err == nil {
			var info protocol.Info
			if err = c.request(protocol.TInfo, nil, &info); err == nil {
				return c, info, nil
			}
			c.Close()
		}
		if !shimLocked(b.path(shimapi.LockFile)) {
			return nil, protocol.Info{}, fmt.Errorf("start box %s: another process started it, and its start failed: %w (%w)", b.rec.ID, b.stoppedError(), errShimGone)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, protocol.Info{}, errdefs.Errorf(errdefs.ErrTimeout, "start box %s: another process is starting it and has not finished", b.rec.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shimLocked reports whether a shim holds the box's lock file.
func shimLocked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

func (b *Box) boot(ctx context.Context) (*conn, protocol.Info, error) {
	var none protocol.Info
	cfg := b.rec.Config
	stages := newBootStages()
	img, err := b.image()
	if err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	layers, err := b.rt.images.Rootfs(ctx, img)
	if err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	stages.lap(&stages.rec.ImagePrepareMs)
	_, err = os.Lstat(b.path(shimapi.DiskFile))
	firstStart := errors.Is(err, fs.ErrNotExist)
	if err := makeDisk(b.path(shimapi.DiskFile), cfg.DiskSizeGB); err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	os.Remove(b.path(shimapi.ExitFile))
	sc := shimapi.Config{BoxID: b.rec.ID, Dir: b.dir, Kernel: b.rt.assets.kernel(), Initrd: b.rt.assets.initrd(),
		QEMU: b.rt.qemu, MemoryMiB: cfg.MemoryMiB, CPUs: cfg.CPUs, Layers: layers, RequireKVM: b.rt.requireKVM,
		BootTimeout: cfg.BootTimeout, StopTimeout: 10 * time.Second, OwnerUID: os.Getuid(),
		AutoRemove: cfg.AutoRemove, Detach: cfg.Detach, Network: cfg.shimNetwork(), Netstack: b.rt.assets.netstack(),
		KernelArgs: cfg.KernelArgs, Hostname: firstNonEmpty(cfg.Hostname, DefaultHostname)}
	if len(cfg.Volumes) > 0 {
		sc.Volumes, sc.Virtiofsd = cfg.Volumes, b.rt.assets.virtiofsd()
	} else if firstStart && b.rt.templates {
		// A template's disk replaces the fresh one; a disk that has
		// been used keeps its data, so later starts boot.
		sc.Templates = b.rt.templateDir(b.rec.ImageDigest)
		sc.Park = b.parkRequests(cfg)
	}
	if err := writeJSON(b.path(shimapi.ConfigFile), sc); err != nil {
		return nil, none, err
	}
	stages.lap(&stages.rec.BoxConfigMs)
	release, err := b.rt.admitBoot(ctx, b.rec.ID, bootNeedMiB(b.rec.Config))
	if err != nil {
		return nil, none, err
	}
	stages.lap(&stages.rec.BootQueueMs)
	err = b.spawnShim(ctx, cfg.BootTimeout*shimapi.BootWallFactor+15*time.Second)
	release() // booted (or failed): the next box may boot
	if err != nil {
		return nil, none, err
	}
	stages.lap(&stages.rec.BoxSpawnMs)
	c, err := dialShim(sc.Path(shimapi.SocketFile), b.stoppedError)
	if err != nil {
		return nil, none, fmt.Errorf("start box %s: connect to shim: %w", b.rec.ID, err)
	}
	var info protocol.Info
	if err := c.request(protocol.TInfo, nil, &info); err != nil {
		c.Close()
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	stages.save(b)
	return c, info, nil
}

// spawnShim starts boxlite-shim and waits for its ready line.
func (b *Box) spawnShim(ctx context.Context, deadline time.Duration) error {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	defer readyW.Close()
	logf, err := os.OpenFile(b.path(shimapi.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(b.rt.assets.shim(), b.path(shimapi.ConfigFile))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{readyW} // fd 3
	// Its own session: a terminal's SIGHUP or ^C to the app never reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A box that is not detached stops when this process dies: the shim
	// stops it at EOF on fd 4, which the kernel closes with the process.
	var deathW *os.File
	if !b.rec.Config.Detach {
		deathR, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer deathR.Close()
		deathW = w
		cmd.ExtraFiles = append(cmd.ExtraFiles, deathR) // fd 4
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		closeFile(deathW)
		return fmt.Errorf("start box %s: shim: %w", b.rec.ID, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()

	type result struct {
		r   shimapi.Ready
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var res result
		line, err := bufio.NewReader(readyR).ReadBytes('\n')
		if err != nil {
			res.err = fmt.Errorf("shim exited before the box was ready: %s", safetext.Text(shimapi.ConsoleTail(b.path(shimapi.LogFile), 1024)))
		} else {
			res.err = json.Unmarshal(line, &res.r)
		}
		ch <- res
	}()
	var res result
	unanswered := true // the shim is ended before it said how its start went
	select {
	case res = <-ch:
		unanswered = false
	case <-time.After(deadline):
		res.err = errdefs.Errorf(errdefs.ErrTimeout, "shim gave no ready answer within %s", deadline)
	case <-ctx.Done():
		res.err = errdefs.Errorf(errdefs.ErrTimeout, "start cancelled: %v", ctx.Err())
	}
	if res.err == nil && res.r.Running {
		res.err = errShimRunning
	} else if res.err == nil && res.r.Error != "" {
		res.err = errdefs.New(errdefs.Kind(res.r.Kind), res.r.Error)
	}
	if res.err != nil {
		// The shim stops the VM and exits: SIGTERM ends a booting shim
		// at once (its parent-death pipe is read only once it serves the
		// box). endShim waits for its VMM too: a cancelled start leaves
		// no process behind.
		closeFile(deathW)
		if p := openProc(cmd.Process.Pid); p != nil {
			if err := endShim(b.rec.ID, p); err != nil {
				res.err = fmt.Errorf("%w (and %v)", res.err, err)
			}
		}
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if unanswered {
			b.noteEnded(res.err.Error())
		}
		return fmt.Errorf("start box %s: %w", b.rec.ID, res.err)
	}
	b.shim, b.shimCh, b.death = cmd, exited, deathW
	return nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// Stop shuts the box down: the agent syncs and unmounts, the VM powers off,
// the shim exits. Stopping a stopped box is a no-op.
func (b *Box) Stop(ctx context.Context) error {
	b.refresh() // another handle or process may have stopped it
	b.mu.Lock()
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
	b.mu.Lock()
	ours := b.shim != nil && !b.rec.Config.Detach
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
	b.refresh()
	if s := b.State(); s != StateStopped && s != StateConfigured {
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

// Exec starts a process in the box. A configured or stopped box is started
// first, as BoxLite's exec does; one whose last run ended in a fault (see
// shimapi.Exit) fails with ErrInvalidState naming it until Start, and a
// removed one fails with ErrInvalidState.
func (b *Box) Exec(ctx context.Context, cmd Command) (*Execution, error) {
	if len(cmd.Argv) == 0 {
		argv, err := b.DefaultCommand()
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		cmd.Argv = argv
	}
	if cmd.Argv[0] == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: empty command")
	}
	if cmd.Timeout < 0 || cmd.Grace < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: negative timeout or grace")
	}
	if cmd.OutputLimit < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: negative output limit %d", cmd.OutputLimit)
	}
	if cmd.OutputLimit == 0 {
		cmd.OutputLimit = b.rt.outputLimit
	}
	if cmd.Tty {
		if cmd.Rows == 0 {
			cmd.Rows = DefaultRows
		}
		if cmd.Cols == 0 {
			cmd.Cols = DefaultCols
		}
		if err := checkTermSize("exec", cmd.Rows, cmd.Cols); err != nil {
			return nil, err
		}
	}
	c, info, err := b.running(ctx, "exec")
	if err != nil {
		return nil, err
	}
	hello := info.Hello
	if cmd.Tty && !hello.Has(protocol.FeatureTTY) {
		// An older agent would ignore the field and run the process on pipes.
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "exec: box %s runs an agent without terminal support (%s); restart the box to update it", b.rec.ID, hello.Agent)
	}
	req, err := b.request(cmd)
	if err != nil {
		return nil, err
	}
	e := &Execution{argv: cmd.Argv, timeout: cmd.Timeout, limit: cmd.OutputLimit, conn: c, done: make(chan struct{}), stdin: newSendWindow(protocol.InitialWindow), tty: cmd.Tty,
		groupSignal: hello.Has(protocol.FeatureSignalGroup)}
	credit := func(fd int) func(int) {
		return func(n int) { c.send(protocol.TCredit, e.id, protocol.Credit{Fd: fd, Bytes: n}) }
	}
	e.stdout, e.stderr = newWindow(credit(1)), newWindow(credit(2))
	e.Stdout, e.Stderr = e.stdout, e.stderr
	if cmd.Stdin {
		e.Stdin = stdinWriter{e}
	}
	if err := b.rt.counters.openExec(c, e, req); err != nil {
		return nil, fmt.Errorf("exec %s: %w", quoteArgv(cmd.Argv), err)
	}
	return e, nil
}

// hostMargin is how long past a command's timeout and grace period the host
// waits for the agent to report the exit: the guest enforces timeouts, but a
// hostile agent could just never answer.
const hostMargin = 10 * time.Second

// Run executes a command and collects its output.
func (b *Box) Run(ctx context.Context, cmd Command) (*ExecResult, error) {
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Timeout <= 0 {
		return e.Collect(ctx)
	}
	grace := cmd.Grace
	if grace == 0 {
		grace = protocol.DefaultGrace
	}
	bound := cmd.Timeout + grace + hostMargin
	bctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	res, err := e.Collect(bctx)
	if bctx.Err() != nil && ctx.Err() == nil {
		err = errdefs.Errorf(errdefs.ErrTimeout, "exec %s: the box did not report the exit within %s of its %s timeout; the process was abandoned",
			quoteArgv(cmd.Argv), grace+hostMargin, cmd.Timeout)
	}
	return res, err
}

// image is the box's image, read from the store once per handle (an image
// is immutable: it is named by its digest).
func (b *Box) image() (image.Image, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.img == nil {
		img, err := b.rt.images.Get(b.rec.ImageDigest)
		if err != nil {
			return image.Image{}, err
		}
		b.img = &img
	}
	return *b.img, nil
}

// DefaultCommand is what a bare exec runs: the box's entrypoint and cmd,
// each defaulting to the image's, as docker run does (an entrypoint given
// for the box drops the image's cmd). ErrInvalidArgument when both are empty.
func (b *Box) DefaultCommand() ([]string, error) {
	img, err := b.image()
	if err != nil {
		return nil, err
	}
	cfg := b.rec.Config
	entry, args := img.Config.Entrypoint, img.Config.Cmd
	if cfg.Entrypoint != nil {
		entry, args = cfg.Entrypoint, nil
	}
	if cfg.Cmd != nil {
		args = cfg.Cmd
	}
	argv := append(append([]string{}, entry...), args...)
	if len(argv) == 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "no command given, and box %s (image %s) has no entrypoint or cmd", b.rec.ID, cfg.Image)
	}
	return argv, nil
}

// request merges image, box and command settings into the agent's request.
func (b *Box) request(cmd Command) (protocol.Exec, error) {
	img, err := b.image()
	if err != nil {
		return protocol.Exec{}, fmt.Errorf("exec: %w", err)
	}
	env := map[string]string{}
	for _, kv := range img.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, m := range []map[string]string{b.rec.Config.Env, cmd.Env} {
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return protocol.Exec{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: env key %q is invalid", k)
			}
			env[k] = v
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	req := protocol.Exec{Argv: cmd.Argv, Stdin: cmd.Stdin, TimeoutMs: cmd.Timeout.Milliseconds(), GraceMs: cmd.Grace.Milliseconds()}
	if cmd.Tty {
		req.Tty, req.Rows, req.Cols = true, cmd.Rows, cmd.Cols
	}
	if cmd.Timeout > 0 && req.TimeoutMs == 0 {
		req.TimeoutMs = 1
	}
	for _, k := range keys {
		req.Env = append(req.Env, k+"="+env[k])
	}
	req.Cwd = firstNonEmpty(cmd.Cwd, b.rec.Config.WorkingDir, img.Config.WorkingDir, "/")
	req.User = firstNonEmpty(cmd.User, b.rec.Config.User, img.Config.User)
	return req, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// minFreeMiB is the free space a box's disk needs on the host to start: the
// disk is sparse, so this is a floor, not its size.
const minFreeMiB = 512

// makeDisk creates the box's writable ext4 disk once, sparse, atomically,
// on a file system with at least minFreeMiB free.
func makeDisk(path string, sizeGB int) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &fs); err == nil {
		if free := fs.Bavail * uint64(fs.Bsize) >> 20; free < minFreeMiB {
			return errdefs.Errorf(errdefs.ErrLimit, "disk %s: %d MiB free on the host, a box needs at least %d MiB", path, free, minFreeMiB)
		}
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		for _, p := range []string{"/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext4"} {
			if _, e := os.Stat(p); e == nil {
				mkfs, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return errdefs.Errorf(errdefs.ErrNotFound, "mkfs.ext4 (install e2fsprogs)")
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(sizeGB) << 30)
	f.Close()
	if err == nil {
		var out []byte
		out, err = exec.Command(mkfs, "-q", "-F", "-L", "boxlite-rw", "-E", "lazy_itable_init=1,lazy_journal_init=1", tmp).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("mkfs.ext4: %v: %s", err, out)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
