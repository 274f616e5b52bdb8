//go:build linux

package agent

import (
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// An exec ends with its own process, as docker exec's and BoxLite's do, not
// when every process that inherited its output pipes has closed them: a
// server started in the background (`nohup srv &`, `(srv &)`, even without
// redirecting its output) keeps running after the exec that started it,
// and the exec does not wait for it. Once the process has exited, its
// output is read until the pipe stays empty for exitIdle (what the process
// wrote before it exited is there already); the exec then ends, and the
// pipe goes to a reader that discards whatever the background processes
// still write, so they are neither blocked nor killed by SIGPIPE. That
// reader ends when they close the pipe (or exit). Only the exec's process
// group is killed with it (a timeout, a kill, a cancel); orphans are
// reaped by the sandbox init, never killed.

// exitIdle is how long the output of an exited process may stay empty
// before the exec ends, and exitTailMax how long output may go on after
// what the process left in the pipe was read: room for a background job's
// last words, not for a chatty one.
const (
	exitIdle    = 100 * time.Millisecond
	exitTailMax = 500 * time.Millisecond
)

// maxOrphanPipes bounds the pipes kept open for background processes; past
// it, a pipe is closed (its writers then get EPIPE).
const maxOrphanPipes = 256

var orphanPipes atomic.Int64

// wakeOutputs notes, at the process's exit, how much of its output the
// pipes hold (all of it is read, however slowly the host takes it), and
// makes a read that waits on an empty pipe give up after exitIdle (the
// pump then checks once more). TIOCINQ is FIONREAD.
func (e *execution) wakeOutputs() {
	for fd, f := range []*os.File{1: e.stdout, 2: e.stderr} {
		if f == nil {
			continue
		}
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(sysfd uintptr) {
				if n, err := unix.IoctlGetInt(int(sysfd), unix.TIOCINQ); err == nil {
					e.owed[fd].Store(int64(n))
				}
			})
		}
		_ = f.SetReadDeadline(time.Now().Add(exitIdle))
	}
}

// exitTail is one output pump's view of its process's exit.
type exitTail struct {
	e   *execution
	fd  int
	f   *os.File
	end time.Time // set once what the process left in the pipe is read
}

// read notes k bytes read and reports whether the exec's output is over
// (background processes keep writing past exitTailMax).
func (t *exitTail) read(k int) bool {
	if !t.e.exitedFlag.Load() {
		return false
	}
	if t.e.owed[t.fd].Add(-int64(k)) > 0 {
		_ = t.f.SetReadDeadline(time.Time{}) // the process's own output: all of it
		return false
	}
	return t.wait()
}

// empty notes an empty pipe: after the exit, the rest may only trickle in.
func (t *exitTail) empty() {
	if t.e.exitedFlag.Load() {
		t.e.owed[t.fd].Store(0)
		t.wait()
	}
}

// wait sets how long the next read may wait, and reports whether the tail
// is over.
func (t *exitTail) wait() bool {
	now := time.Now()
	if t.end.IsZero() {
		t.end = now.Add(exitTailMax)
	}
	if !now.Before(t.end) {
		return true
	}
	d := now.Add(exitIdle)
	if t.end.Before(d) {
		d = t.end
	}
	_ = t.f.SetReadDeadline(d)
	return false
}

// orphanOutput takes over f, an output pipe of the exited process that
// its background processes may still hold, and reports whether it did
// (else the caller closes f).
func (e *execution) orphanOutput(f *os.File) bool {
	if orphanPipes.Add(1) > maxOrphanPipes {
		orphanPipes.Add(-1)
		return false
	}
	go func() {
		defer orphanPipes.Add(-1)
		defer f.Close()
		_ = f.SetReadDeadline(time.Time{})
		var buf [4096]byte
		for {
			if _, err := f.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	return true
}
