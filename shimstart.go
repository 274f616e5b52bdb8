package boxlite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/safetext"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// running returns the connection to the box's VM for op, starting a
// configured or stopped box first (as BoxLite's exec does), unless its last
// run ended in a fault (a crashed VMM, a protocol violation): that box only
// says why until Start is called, so a failing box is not rebooted in a loop.
func (b *Box) running(ctx context.Context, op string) (*conn, protocol.Info, error) {
	for tried := false; ; tried = true {
		if err := b.awaitRemoval(ctx); err != nil {
			return nil, protocol.Info{}, fmt.Errorf("%s: %w", op, err)
		}
		if err := b.awaitPause(ctx); err != nil {
			return nil, protocol.Info{}, fmt.Errorf("%s: %w", op, err)
		}
		b.mu.Lock()
		c, state, info := b.conn, b.state, b.info
		b.mu.Unlock()
		switch {
		case state == StateRunning && c != nil && c.closed():
			// Its shim went away, and attach's handler has yet to take
			// note (an exec that failed with the connection returns
			// first): wait for it, then look again, never restarting.
			if err := b.awaitDrop(ctx, c); err != nil {
				return nil, info, fmt.Errorf("%s: %w", op, err)
			}
		case state == StateRunning && c != nil:
			b.touch()
			return c, info, nil
		case state == StateStopped && b.faulted():
			// Not restarted behind the caller's back: say what ended it.
			return nil, info, fmt.Errorf("%s: %w; Start boots it again", op, b.stoppedError())
		case (state == StateConfigured || state == StateStopped || state == StateStarting || state == StatePaused) && !tried:
			if err := b.Start(ctx); err != nil {
				return nil, info, fmt.Errorf("%s: %w", op, err)
			}
		case state == StateStopped:
			return nil, info, fmt.Errorf("%s: %w", op, b.stoppedError()) // it stopped again at once
		case state == StateRemoved:
			return nil, info, b.removedError(op)
		default:
			return nil, info, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is %s", op, b.rec.ID, state)
		}
	}
}

// awaitDrop waits until attach's handler has taken note that c, the box's
// connection, is gone (a goroutine of its own, under the box's lock).
func (b *Box) awaitDrop(ctx context.Context, c *conn) error {
	select {
	case <-c.noted:
		return nil
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "box %s: its connection to its shim ended: %v", b.rec.ID, ctx.Err())
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
	b.rt.warnKVM()
	cfg := b.config()
	stages := newBootStages()
	img, err := b.image()
	if err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	stages.lap(&stages.rec.ImagePrepareMs)
	layers, err := b.rt.images.Rootfs(ctx, img)
	if err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	stages.lapNew(&stages.rec.GuestRootfsMs)
	_, err = os.Lstat(b.path(shimapi.DiskFile))
	firstStart := errors.Is(err, fs.ErrNotExist)
	if err := makeDisk(b.path(shimapi.DiskFile), cfg.DiskSizeGB); err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	resume := b.paused()
	if !resume { // what a pause that died midway left
		os.Remove(b.path(shimapi.StateFile))
		os.Remove(b.path(shimapi.StateFile) + ".tmp")
	}
	os.Remove(b.path(shimapi.ExitFile))
	stages.lapNew(&stages.rec.FilesystemSetupMs)
	sc := shimapi.Config{Resume: resume, BoxID: b.rec.ID, Dir: b.dir, Kernel: b.rt.assets.kernel(), Initrd: b.rt.assets.initrd(),
		QEMU: b.rt.qemu, MemoryMiB: cfg.MemoryMiB, CPUs: cfg.CPUs, Layers: layers, RequireKVM: b.rt.requireKVM,
		BootTimeout: cfg.BootTimeout, StopTimeout: 10 * time.Second, OwnerUID: os.Getuid(),
		AutoRemove: cfg.AutoRemove, Detach: cfg.Detach, Network: cfg.shimNetwork(), Netstack: b.rt.assets.netstack(),
		KernelArgs: cfg.KernelArgs, Hostname: firstNonEmpty(cfg.Hostname, DefaultHostname), AutoPause: cfg.AutoPause,
		Secrets: len(cfg.Secrets) > 0 && cfg.Network.Mode != NetworkDisabled, Pool: b.inPool.Load(),
		NoJail: !cfg.security().JailerEnabled}
	sc.HealthCheck = cfg.HealthCheck
	if sc.Sandbox, err = cfg.sandboxPolicy(); err != nil {
		return nil, none, fmt.Errorf("start box %s: %w", b.rec.ID, err)
	}
	if len(cfg.Volumes) > 0 {
		sc.Volumes, sc.Virtiofsd = cfg.Volumes, b.rt.assets.virtiofsd()
	} else if firstStart && b.rt.templates && !resume && len(cfg.Secrets) == 0 && cfg.Capabilities == nil && cfg.Security == nil {
		// (A box with secrets boots: its CA goes into its own disk, never
		// a template's that other boxes start from. A box with advanced
		// options boots: templates are made with the defaults.)
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
	} else if res.err == nil && res.r.StateRefused {
		res.err = &stateError{msg: safetext.Text(res.r.Error)}
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
