//go:build linux

package agent

import (
	"errors"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// maxWindow bounds the window a host can grant by crediting more than it got.
const maxWindow = 1 << 30

// outputLinger is how long an exec whose process was killed after a timeout
// waits for its output pipes to close (a descendant that left the process
// group may hold them open for ever).
const outputLinger = time.Second

// outChunk is the most output one frame carries: header and data are then
// exactly MaxChunk, two of the virtio console's writes (its driver takes at
// most 32 KiB per write; a frame a few bytes over took a third write, each
// a copy and a VM exit).
const outChunk = protocol.MaxChunk - protocol.HeaderSize

// outPipeSize is the capacity asked for an exec's output pipes: the
// window's worth, so a writer keeps going while the agent sends, instead of
// waking it for every 64 KiB (the default).
const outPipeSize = protocol.InitialWindow

// bufPool holds output buffers: a frame header's room, then outChunk bytes.
var bufPool = sync.Pool{New: func() any { b := make([]byte, protocol.MaxChunk); return &b }}

// execution is one exec stream: a process, its pipes and flow-control windows.
//
// Frames: Started, then Stdout/Stderr/Credit(fd 0) in any order, then exactly
// one Exit or Error, after which nothing (over). Cancel sets over without a
// last frame: the host has gone.
type execution struct {
	s      *server
	id     uint32
	pid    int // in the agent's PID namespace: what it signals and waits for
	boxPid int // in the box's: what the host is told (0 if unknown)

	timeout, grace time.Duration

	stdout, stderr *os.File // read ends; with a TTY, stdout is the terminal's master and stderr is nil
	stdin          *os.File // write end; nil without Stdin. With a TTY, the same file as tty
	tty            *os.File // with a TTY: the master, for input, resizes and the EOF character
	outputs        sync.WaitGroup
	exitCh         chan struct{}
	exitedFlag     atomic.Bool     // the process has exited (orphanio.go)
	owed           [3]atomic.Int64 // by fd: bytes in the pipe when it exited, not yet read

	// over is set, under s.wmu, once the stream's last frame is written or the
	// stream is cancelled; no frame is written for the stream after it.
	over atomic.Bool
	// started is the Started frame held back for startedHold (under
	// s.wmu), nil once sent or dropped: see announce.
	started      *protocol.Frame
	startedTimer *time.Timer

	mu       sync.Mutex
	cond     *sync.Cond
	win      [3]int64 // output windows, by fd (1, 2)
	exited   bool
	status   unix.WaitStatus
	timedOut bool
	released bool
	timers   []*time.Timer

	stdinQ       []stdinChunk
	stdinPending int // of this epoch: queued or being written, not yet credited back
	stdinClosed  bool
	stdinBroken  bool

	detached // detach.go: set for a detachable exec (Exec.Detach)
	lane     execLane
}

// stdinChunk is host data for the process, with the epoch (detach.go) of
// the stream that sent it: only that stream gets its credit.
type stdinChunk struct {
	data  []byte
	epoch uint64
}

func newExecution(s *server, id uint32, req protocol.Exec) *execution {
	e := &execution{s: s, id: id, exitCh: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	e.win[1], e.win[2] = protocol.InitialWindow, protocol.InitialWindow
	e.timeout = millis(req.TimeoutMs)
	e.grace = defaultGrace
	e.lane.ok = req.Lane && req.Detach == "" && !req.Tty && s.cfg.Lane != nil
	if req.GraceMs > 0 {
		e.grace = millis(req.GraceMs)
	}
	return e
}

// onExit is called by the reaper with the process's wait status. From now
// on the exec's output ends when its pipes run dry (orphanio.go), not when
// every process that inherited them closed them.
func (e *execution) onExit(ws unix.WaitStatus) {
	e.mu.Lock()
	e.exited, e.status = true, ws
	e.mu.Unlock()
	e.exitedFlag.Store(true)
	close(e.exitCh)
	e.wakeOutputs()
}

// run announces the process and starts moving its data.
func (e *execution) run() {
	if f, err := protocol.Encode(protocol.TStarted, 0, protocol.Started{Pid: e.boxPid}); err == nil {
		e.announce(f)
	}
	e.outputs.Add(1)
	go e.pump(1, e.stdout, protocol.TStdout)
	if e.stderr != nil {
		e.outputs.Add(1)
		go e.pump(2, e.stderr, protocol.TStderr)
	}
	if e.stdin != nil {
		go e.stdinLoop()
	}
	if e.timeout > 0 {
		e.mu.Lock()
		if !e.released {
			e.timers = append(e.timers, time.AfterFunc(e.timeout, e.onTimeout))
		}
		e.mu.Unlock()
	}
	go e.wait()
}

// guard contains a panic in one of the exec's goroutines to the exec.
func (e *execution) guard(what string) {
	if r := recover(); r != nil {
		e.s.cfg.Logf("panic in exec of pid %d %s: %v\n%s", e.pid, what, r, debug.Stack())
		e.fail(errdefs.Errorf(errdefs.ErrInternal, "agent: exec %s: panic: %v", what, r))
	}
}

// wait ends the stream once the process has exited and its outputs reached
// EOF (a terminal's master reads EIO once no process holds the terminal).
func (e *execution) wait() {
	defer e.guard("wait")
	<-e.exitCh
	e.outputs.Wait()
	e.mu.Lock()
	ws, timedOut := e.status, e.timedOut
	e.mu.Unlock()
	ex := protocol.Exit{TimedOut: timedOut}
	if ws.Signaled() {
		ex.Signal = int(ws.Signal())
		ex.Code = 128 + ex.Signal
	} else {
		ex.Code = ws.ExitStatus()
	}
	if f, err := protocol.Encode(protocol.TExit, 0, ex); err == nil {
		e.finish(f)
	}
	e.release()
}

// send writes one frame of this stream unless the stream is over (or,
// detached, has no stream): f.Stream is set to the exec's stream.
func (e *execution) send(f protocol.Frame) {
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.over.Load() || e.gone {
		return
	}
	e.flushStartedLocked()
	f.Stream = e.id
	_ = e.s.writeLocked(f)
}

// sendHeaded writes one output frame of fd, type t, whose payload is
// b[HeaderSize:], unless the stream is over. A detachable exec keeps the
// bytes until the host credits them, attached or not (detach.go).
func (e *execution) sendHeaded(fd int, t protocol.Type, b []byte) {
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.detachID != "" {
		e.retain[fd] = append(e.retain[fd], b[protocol.HeaderSize:]...)
	}
	if e.over.Load() || e.gone {
		return
	}
	e.flushStartedLocked()
	_ = e.s.writeHeadedLocked(t, e.id, b)
}

// finish writes the stream's last frame, once. A detached exec keeps it
// for the next attach instead (detach.go).
func (e *execution) finish(f protocol.Frame) {
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.over.Load() {
		return
	}
	if e.gone {
		if e.ended == nil {
			e.ended, e.endedAt = &f, time.Now()
		}
		return
	}
	e.over.Store(true)
	f.Stream = e.id
	if started := e.takeStartedLocked(); started != nil {
		_ = e.s.writeFramesLocked(*started, f) // one write for both
		return
	}
	_ = e.s.writeLocked(f)
}

// fail ends the stream with an Error frame and kills the process group.
func (e *execution) fail(err error) {
	if f, encErr := protocol.Encode(protocol.TError, 0, protocol.ErrorOf(err)); encErr == nil {
		e.finish(f)
	}
	e.abort()
}

// cancel ends the stream without a last frame (the host has gone) and kills
// the process group; its output is discarded. A detachable exec detaches
// instead: it goes on without a stream (detach.go).
func (e *execution) cancel() {
	if e.detachID != "" {
		e.detach()
		return
	}
	e.terminate()
}

// terminate ends the stream without a last frame and kills the process
// group, detachable or not (the agent's connection ended).
func (e *execution) terminate() {
	e.s.wmu.Lock()
	e.over.Store(true)
	e.takeStartedLocked()
	e.s.wmu.Unlock()
	e.abort()
}

func (e *execution) abort() {
	e.mu.Lock()
	e.killGroupLocked(unix.SIGKILL)
	e.cond.Broadcast()
	e.mu.Unlock()
	e.closeOutputs()
	e.release()
}

// release frees the stream id and what the exec holds; the reaper still
// delivers the exit status, which then goes nowhere.
func (e *execution) release() {
	e.mu.Lock()
	if e.released {
		e.mu.Unlock()
		return
	}
	e.released = true
	for _, t := range e.timers {
		t.Stop()
	}
	e.cond.Broadcast()
	e.mu.Unlock()
	e.closeInput() // unblocks a write into a process that stopped reading
	e.s.remove(e)
	if e.detachID != "" {
		e.s.detachedDone(e)
	}
}

func (e *execution) closeOutputs() {
	e.stdout.Close()
	if e.stderr != nil {
		e.stderr.Close()
	}
}

func (e *execution) closeInput() {
	if e.stdin != nil {
		e.stdin.Close()
	}
	if e.tty != nil {
		e.tty.Close()
	}
}

// killGroupLocked signals the process group; with a TTY, every group of
// the exec's session, where a job-control shell runs its jobs.
func (e *execution) killGroupLocked(sig unix.Signal) {
	if e.released || e.pid <= 0 {
		return
	}
	_ = unix.Kill(-e.pid, sig)
	if e.tty != nil {
		for _, pg := range sessionGroups(e.pid) {
			if pg != e.pid {
				_ = unix.Kill(-pg, sig)
			}
		}
	}
}

// signal delivers sig to the exec's process; to its whole process group
// (and, with a TTY, its session's groups) when the host asks (a shell
// session interrupting its command) and for SIGKILL, as a timeout's does: a
// killed shell's children would otherwise keep its output open and the exec
// running (sh -c "sleep 100; echo done").
func (e *execution) signal(sig int, group bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.exited || e.released {
		return // the pid may be reused
	}
	if group || unix.Signal(sig) == unix.SIGKILL {
		e.killGroupLocked(unix.Signal(sig))
		return
	}
	_ = unix.Kill(e.pid, unix.Signal(sig))
}

func (e *execution) onTimeout() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.released {
		return
	}
	e.timedOut = true
	e.killGroupLocked(unix.SIGTERM)
	e.timers = append(e.timers, time.AfterFunc(e.grace, e.onGraceOver))
}

func (e *execution) onGraceOver() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.released {
		return
	}
	e.killGroupLocked(unix.SIGKILL)
	e.timers = append(e.timers, time.AfterFunc(outputLinger, func() {
		e.mu.Lock()
		exited, released := e.exited, e.released
		e.mu.Unlock()
		if exited && !released {
			e.closeOutputs()
		}
	}))
}

// credit returns window for fd 1 or 2; anything else is ignored.
func (e *execution) credit(fd, n int) {
	if (fd != 1 && fd != 2) || n <= 0 {
		return
	}
	if e.detachID != "" {
		if n = e.acked(fd, n); n == 0 {
			return
		}
	}
	e.mu.Lock()
	e.win[fd] = min(e.win[fd]+int64(n), maxWindow)
	e.cond.Broadcast()
	e.mu.Unlock()
}

// waitWindow blocks until fd may send and returns how much; 0 means stop.
// With lane, the next chunk goes through the lane (execlane.go).
func (e *execution) waitWindow(fd int) (n int, lane bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.released && !e.over.Load() {
		if e.laneReadyLocked(fd) {
			if e.lane.held < e.lane.slots {
				return protocol.LaneSlot, true
			}
		} else if e.win[fd] > 0 {
			return int(min(e.win[fd], outChunk)), false
		}
		e.cond.Wait()
	}
	return 0, false
}

// pump moves one output pipe to the host within the window. When the window
// is empty it stops reading, so the pipe fills and the writer blocks.
// Buffers come from a pool and are taken only once the pipe is readable, so
// idle execs hold none; data is read after a header's room, so a frame goes
// out without a copy.
func (e *execution) pump(fd int, f *os.File, t protocol.Type) {
	defer e.outputs.Done()
	if fd == 1 {
		defer e.laneEnd()
	}
	handedOff := false
	defer func() {
		if !handedOff {
			f.Close()
		}
	}()
	defer e.guard("output")
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	probe := false // one read without waiting: is the pipe dry? (orphanio.go)
	tail := exitTail{e: e, fd: fd, f: f}
	for {
		n, lane := e.waitWindow(fd)
		if n == 0 {
			return
		}
		if lane {
			e.laneStart(rc)
		}
		var (
			buf     *[]byte
			k       int
			rerr    error
			dry     bool
			spliced bool
		)
		err := rc.Read(func(sysfd uintptr) bool {
			if lane {
				k, spliced, rerr = e.laneRead(int(sysfd))
			} else {
				buf = bufPool.Get().(*[]byte)
				for {
					k, rerr = unix.Read(int(sysfd), (*buf)[protocol.HeaderSize:protocol.HeaderSize+n])
					if rerr != unix.EINTR {
						break
					}
				}
			}
			if rerr == unix.EAGAIN {
				if buf != nil {
					bufPool.Put(buf)
				}
				buf = nil
				if probe {
					dry = true
					return true
				}
				tail.empty()
				return false
			}
			return true
		})
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !probe {
			// The process has exited and its pipe stayed empty: look once
			// more without waiting (data may have come while no read waited).
			if buf != nil {
				bufPool.Put(buf)
			}
			_ = f.SetReadDeadline(time.Time{})
			probe = true
			continue
		}
		if dry {
			handedOff = e.orphanOutput(f)
			return
		}
		probe = false
		if err != nil { // closed by cancel or timeout
			if buf != nil {
				bufPool.Put(buf)
			}
			return
		}
		over := k > 0 && tail.read(k)
		switch {
		case k > 0 && lane:
			if lerr := e.laneSend(k, spliced); lerr != nil {
				e.fail(lerr)
				return
			}
		case k > 0:
			e.mu.Lock()
			e.win[fd] -= int64(k)
			e.mu.Unlock()
			e.sendHeaded(fd, t, (*buf)[:protocol.HeaderSize+k])
			if fd == 1 {
				e.maybeAskLane(k)
			}
		}
		if buf != nil {
			bufPool.Put(buf)
		}
		if rerr != nil || k <= 0 {
			return
		}
		if over { // background processes keep writing: the exec is over
			handedOff = e.orphanOutput(f)
			return
		}
	}
}
