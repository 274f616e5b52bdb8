//go:build linux

package agent

import (
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// An exec's stdin: the host's data queued for the process, written by
// stdinLoop and credited back once written.

// sendCredit credits n bytes of stdin that the stream of epoch sent.
func (e *execution) sendCredit(n int, epoch uint64) {
	if n <= 0 {
		return
	}
	f, err := protocol.Encode(protocol.TCredit, 0, protocol.Credit{Fd: 0, Bytes: n})
	if err != nil {
		return
	}
	e.s.wmu.Lock()
	defer e.s.wmu.Unlock()
	if e.over.Load() || e.gone || e.epoch != epoch {
		return // the stream that sent the bytes is gone
	}
	e.flushStartedLocked()
	f.Stream = e.id
	_ = e.s.writeLocked(f)
}

// onStdin queues host data for the process. Data that cannot reach the
// process (no stdin requested, closed, or the process stopped reading for
// good) is dropped but still credited, so the host never stalls.
func (e *execution) onStdin(data []byte) {
	if len(data) == 0 {
		return
	}
	e.mu.Lock()
	epoch := e.epoch
	if e.stdin == nil || e.stdinClosed || e.stdinBroken || e.released {
		e.mu.Unlock()
		e.sendCredit(len(data), epoch)
		return
	}
	if e.stdinPending+len(data) > protocol.InitialWindow {
		pending := e.stdinPending
		e.mu.Unlock()
		e.fail(errdefs.Errorf(errdefs.ErrLimit, "stdin: %d bytes sent with %d unacknowledged, window %d",
			len(data), pending, protocol.InitialWindow))
		return
	}
	e.stdinPending += len(data)
	e.stdinQ = append(e.stdinQ, stdinChunk{data, epoch})
	e.cond.Broadcast()
	e.mu.Unlock()
}

func (e *execution) onStdinClose() {
	e.mu.Lock()
	e.stdinClosed = true
	e.cond.Broadcast()
	e.mu.Unlock()
}

// stdinLoop writes queued stdin into the process and credits each chunk back
// once written; after TStdinClose drained the queue it closes the pipe or,
// with a TTY, types the terminal's EOF character (the master stays open:
// the output is still read through it and the size still set).
func (e *execution) stdinLoop() {
	if e.tty == nil {
		defer e.stdin.Close()
	}
	defer e.guard("stdin")
	for {
		e.mu.Lock()
		for len(e.stdinQ) == 0 && !e.stdinClosed && !e.released && !e.over.Load() {
			e.cond.Wait()
		}
		if e.released || e.over.Load() {
			e.mu.Unlock()
			return
		}
		if len(e.stdinQ) == 0 { // closed by the host
			broken := e.stdinBroken
			e.mu.Unlock()
			if e.tty != nil && !broken {
				_, _ = e.stdin.Write([]byte{e.eofChar()})
			}
			return
		}
		chunk := e.stdinQ[0]
		e.stdinQ[0] = stdinChunk{}
		e.stdinQ = e.stdinQ[1:]
		broken := e.stdinBroken
		e.mu.Unlock()
		if !broken {
			if _, err := e.stdin.Write(chunk.data); err != nil {
				e.mu.Lock()
				e.stdinBroken = true
				e.mu.Unlock()
			}
		}
		e.mu.Lock()
		if chunk.epoch == e.epoch {
			e.stdinPending -= len(chunk.data)
		}
		e.mu.Unlock()
		e.sendCredit(len(chunk.data), chunk.epoch)
	}
}
