package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// idleOutputBytes is the output written between cells kept for the next cell.
const idleOutputBytes = 1 << 20

// interp is one interpreter of a Python session and the goroutine reading
// its driver's frames.
type interp struct {
	s       *Python
	p       Process
	hello   driverHello
	errTail *tail
	errDone chan struct{} // closed when stderr has ended

	mu       sync.Mutex
	cell     *Cell   // the cell running, nil between cells
	idle     []Chunk // output written between cells, for the next one
	idleSize int
	dropped  int
	gone     chan struct{} // closed when the interpreter is gone
	stopped  error         // set when the host stopped it on purpose (Close, Reset)
	protoErr error         // a broken frame, or a failed write of a cell
}

// waitStderr gives the stderr copy a moment to catch up with an exit.
func (p *interp) waitStderr() {
	select {
	case <-p.errDone:
	case <-time.After(time.Second):
	}
}

func (p *interp) dead() bool {
	select {
	case <-p.gone:
		return true
	default:
		return false
	}
}

// attach makes c the running cell; false if the interpreter is gone.
func (p *interp) attach(c *Cell) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead() || p.cell != nil {
		return false
	}
	p.cell = c
	if p.dropped > 0 {
		p.idle = append(p.idle, Chunk{Stream: 2, Data: []byte(fmt.Sprintf("[boxlite: %d bytes of output written between cells were dropped]\n", p.dropped))})
	}
	for _, ch := range p.idle {
		c.queue = append(c.queue, ch)
		c.queued += len(ch.Data)
	}
	p.idle, p.idleSize, p.dropped = nil, 0, 0
	return true
}

func (p *interp) running() *Cell {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cell
}

func (p *interp) why() string {
	if t := p.errTail.String(); t != "" {
		return t
	}
	return "no diagnostics"
}

// stop kills the interpreter on purpose; its running cell fails with err.
func (p *interp) stop(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	p.p.Kill()
}

// detach lets go of a named session's interpreter, which runs on.
func (p *interp) detach(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	detachOrKill(p.p)
}

// fail kills an interpreter the session can no longer talk to.
func (p *interp) fail(err error) {
	p.mu.Lock()
	if p.protoErr == nil {
		p.protoErr = err
	}
	p.mu.Unlock()
	p.p.Kill()
}

// send writes a cell's request to the interpreter.
func (p *interp) send(msg []byte) {
	// Stdin takes the cell as the interpreter reads it; the interpreter is
	// idle, so this blocks only for cells larger than the window.
	if _, err := p.p.Stdin().Write(msg); err != nil {
		p.fail(fmt.Errorf("send the cell: %w", err))
	}
}

// read dispatches the driver's frames until the interpreter is gone.
func (p *interp) read(br *bufio.Reader) {
	// The driver runs in the box: its frames are hostile input, and a bug they
	// trigger ends this interpreter, not the host process.
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic while handling a driver frame: %v", r)
			}
		}()
		for {
			var typ byte
			var payload []byte
			if typ, payload, err = readDriverFrame(br); err != nil {
				return err
			}
			if err = p.frame(typ, payload); err != nil {
				return err
			}
		}
	}()
	if !errors.Is(err, io.EOF) {
		p.mu.Lock()
		if p.protoErr == nil && p.stopped == nil {
			p.protoErr = err
		}
		p.mu.Unlock()
	}
	p.p.Kill() // whatever the reason, this interpreter is done
	st, werr := p.p.Wait()
	p.waitStderr()
	p.mu.Lock()
	close(p.gone)
	c := p.cell
	p.cell = nil
	stopped, protoErr := p.stopped, p.protoErr
	p.mu.Unlock()
	if c != nil {
		c.abort(st, werr, stopped, protoErr, p.errTail.String())
	}
	if stopped == nil {
		p.s.sup.restart(p)
	}
}

// cellStderr writes to the running cell's stderr (output between cells is
// kept for the next, as the driver's).
type cellStderr struct{ p *interp }

func (w cellStderr) Write(b []byte) (int, error) {
	w.p.output(Chunk{Stream: 2, Data: append([]byte(nil), b...)})
	return len(b), nil
}

// output hands output to the running cell, or keeps it for the next.
func (p *interp) output(ch Chunk) {
	if c := p.running(); c != nil {
		c.push(ch)
		return
	}
	p.mu.Lock()
	if p.idleSize+len(ch.Data) <= idleOutputBytes {
		p.idle = append(p.idle, ch)
		p.idleSize += len(ch.Data)
	} else {
		p.dropped += len(ch.Data)
	}
	p.mu.Unlock()
}

// frame handles one frame of the driver.
func (p *interp) frame(typ byte, payload []byte) error {
	c := p.running()
	switch typ {
	case 'O', 'E':
		ch := Chunk{Stream: 1, Data: payload}
		if typ == 'E' {
			ch.Stream = 2
		}
		if c != nil {
			c.push(ch)
			return nil
		}
		p.output(ch)
	case 'S':
		if c != nil {
			c.markStarted()
		}
	case 'D':
		var d driverDisplay
		if err := json.Unmarshal(payload, &d); err != nil {
			return fmt.Errorf("result: %v", err)
		}
		r, err := d.result()
		if err != nil {
			return err
		}
		// A display() from a thread of a cell that has ended has no cell
		// to go to, nor has a result in a cell that did not ask for them.
		if c != nil && c.rich && d.ID == c.id {
			c.push(Chunk{Stream: StreamResult, Result: &r})
		}
	case 'R':
		var r driverResult
		if err := json.Unmarshal(payload, &r); err != nil {
			return fmt.Errorf("result: %v", err)
		}
		if c == nil || r.ID != c.id {
			return fmt.Errorf("result of cell %d, which is not running", r.ID)
		}
		p.mu.Lock()
		p.cell = nil
		p.mu.Unlock()
		c.complete(r)
	case 'X':
		var x struct{ Message string }
		json.Unmarshal(payload, &x)
		fmt.Fprintf(p.errTail, "driver: %s\n", x.Message)
	default:
		return fmt.Errorf("unknown frame type %q", typ)
	}
	return nil
}
