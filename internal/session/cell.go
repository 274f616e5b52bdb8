package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/capbuf"
)

// The cell stream: what a running cell wrote, in order, handed to a reader
// (Next, ReadNonblock) or collected into its result (Result), and the
// supervision of its timeout.

// cellQueueBytes is the streamed output buffered before the interpreter is
// made to wait.
const cellQueueBytes = 1 << 20

// CellError is an exception a cell raised.
type CellError struct {
	Type      string `json:"type"`      // "ValueError", "mymodule.MyError", "SystemExit", ...
	Message   string `json:"message"`   // str() of the exception
	Traceback string `json:"traceback"` // as Python prints it, without the driver's frames
}

// CellResult is what a cell did.
type CellResult struct {
	Stdout, Stderr []byte
	// Value is the repr() of the cell's trailing expression, as a notebook
	// shows it; nil when the cell does not end with an expression or it is None.
	Value *string
	// Error is the exception the cell ended with, nil when it completed.
	// SystemExit with a non-zero code is one; an interpreter that died under
	// the cell is reported as Type "InterpreterExited".
	Error *CellError
	// ExitCode is what `python -c CELL` would have exited with: 0, 1 for an
	// exception, the code of SystemExit, 130 for KeyboardInterrupt.
	ExitCode  int
	TimedOut  bool // the cell's timeout (or the caller) interrupted it
	Restarted bool // the interpreter ended under the cell and was started again: state is lost
	// StdoutTruncated and StderrTruncated report output beyond the
	// session's output limit that the result does not hold.
	StdoutTruncated, StderrTruncated bool
	// Results are a rich cell's results (RunOptions.Rich) that Next did
	// not return, in order; ResultsTruncated reports results dropped past
	// the session's output limit.
	Results          []Result
	ResultsTruncated bool
}

// Result is a rich result of a cell, a MIME bundle: the value of its
// trailing expression (IsMain), a display() call, a matplotlib figure.
type Result struct {
	IsMain bool
	// Data maps MIME types to the representation: text for text/*,
	// image/svg+xml and application/javascript, base64 for image/png,
	// image/jpeg and application/pdf, the JSON text for application/json.
	// text/plain is always there for the main result.
	Data map[string]string
}

// Text is the result's text/plain representation ("" if none).
func (r Result) Text() string { return r.Data["text/plain"] }

// size is what a result counts against the output limit and the queue.
func (r Result) size() int {
	n := 0
	for k, v := range r.Data {
		n += len(k) + len(v)
	}
	return n
}

// StreamResult is the Stream of a Chunk that holds a rich result.
const StreamResult = 3

// Chunk is output a running cell wrote, or (Stream StreamResult) a rich
// result it made.
type Chunk struct {
	Stream int // 1 stdout, 2 stderr, 3 (StreamResult) a result
	Data   []byte
	Result *Result // with StreamResult
}

func (ch Chunk) size() int {
	if ch.Result != nil {
		return ch.Result.size()
	}
	return len(ch.Data)
}

// Cell is a running cell (Python.RunStream). Read its output with Next (or
// ReadNonblock) while it runs, then call Result; or call Result alone, which
// collects all of it. Output not read blocks the cell once 1 MiB is queued,
// as a pipe would.
type Cell struct {
	s       *Python
	p       *interp
	id      int
	timeout time.Duration
	rich    bool
	cancel  context.CancelFunc

	started chan struct{}
	done    chan struct{}

	mu          sync.Mutex
	cond        *sync.Cond
	queue       []Chunk
	queued      int
	collect     bool // Result was called: take output without bound
	discard     bool // Close was called: drop output
	out, errb   *capbuf.Buffer
	results     []Result
	resBytes    int64
	resDropped  bool
	notify      func()
	interrupted bool   // SIGINT was sent
	killed      bool   // the cell ignored it and the interpreter was killed
	why         string // "timed out after 1s", "cancelled"
	res         CellResult
	err         error
}

func newCell(s *Python, p *interp, id int, timeout time.Duration, rich bool) *Cell {
	c := &Cell{s: s, p: p, id: id, timeout: timeout, rich: rich, started: make(chan struct{}), done: make(chan struct{}),
		out: capbuf.New(s.opts.OutputLimit), errb: capbuf.New(s.opts.OutputLimit)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *Cell) markStarted() {
	select {
	case <-c.started:
	default:
		close(c.started)
	}
}

// push queues output; it blocks while the queue is full and nobody collects.
func (c *Cell) push(ch Chunk) {
	c.mu.Lock()
	for !c.collect && !c.discard && c.queued >= cellQueueBytes {
		c.cond.Wait()
	}
	switch {
	case c.discard:
	case c.collect:
		c.take(ch)
	default:
		c.queue = append(c.queue, ch)
		c.queued += ch.size()
	}
	notify := c.notify
	c.mu.Unlock()
	c.cond.Broadcast()
	if notify != nil {
		notify()
	}
}

// take adds a chunk to the collected output; callers hold c.mu.
func (c *Cell) take(ch Chunk) {
	if ch.Result != nil {
		if n := int64(ch.Result.size()); c.resBytes+n <= c.out.Limit() {
			c.results = append(c.results, *ch.Result)
			c.resBytes += n
		} else {
			c.resDropped = true
		}
		return
	}
	if ch.Stream == 2 {
		c.errb.Write(ch.Data)
	} else {
		c.out.Write(ch.Data)
	}
}

// supervise enforces the timeout and ctx: SIGINT once the cell runs, then,
// after the grace period, the interpreter is killed (and restarted).
func (c *Cell) supervise(ctx context.Context) {
	var timer <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		timer = t.C
	}
	why := ""
	select {
	case <-c.done:
		return
	case <-timer:
		why = fmt.Sprintf("timed out after %s", c.timeout)
	case <-ctx.Done():
		why = "was cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "ran past its context's deadline"
		}
	}
	select {
	case <-c.done:
		return
	case <-c.started:
	}
	c.mu.Lock()
	c.interrupted, c.why = true, why
	c.mu.Unlock()
	if err := c.p.p.Signal(syscall.SIGINT); err != nil {
		c.p.fail(fmt.Errorf("interrupt: %w", err))
	}
	g := time.NewTimer(c.s.grace)
	defer g.Stop()
	select {
	case <-c.done:
		return
	case <-g.C:
	}
	c.mu.Lock()
	c.killed = true
	c.collect = true // nobody may be reading: let the reader drain to the end
	c.mu.Unlock()
	c.cond.Broadcast()
	c.p.p.Kill()
}

// complete ends the cell with the driver's result.
func (c *Cell) complete(r driverResult) {
	c.mu.Lock()
	c.res = CellResult{Value: r.Value, Error: r.Error, ExitCode: r.ExitCode}
	if c.interrupted {
		c.res.TimedOut = true
		c.err = errdefs.Errorf(errdefs.ErrTimeout, "%s: cell %s: it was interrupted (%s); the session keeps its state", c.s.kind(), c.why, c.s.interruptName())
	}
	c.mu.Unlock()
	c.end()
}

// abort ends the cell whose interpreter is gone.
func (c *Cell) abort(st ExitStatus, waitErr, stopped, protoErr error, diag string) {
	c.mu.Lock()
	c.res.Restarted = stopped == nil
	switch {
	case c.killed:
		c.res.TimedOut = true
		c.res.ExitCode = 128 + int(syscall.SIGKILL)
		c.err = fmt.Errorf("%s: cell %s and did not stop within %s of the interrupt (%s): "+
			"the interpreter was killed and restarted, so the session's variables, imports and definitions are gone: %w: %w",
			c.s.kind(), c.why, c.s.grace, c.s.interruptName(), errdefs.ErrTimeout, ErrRestarted)
	case stopped != nil:
		c.err = stopped
	case protoErr != nil:
		c.err = errdefs.Errorf(errdefs.ErrInternal, "%s: lost the interpreter (%v); it was restarted and the session's state is gone", c.s.kind(), protoErr)
	case waitErr != nil && !errors.Is(waitErr, errdefs.ErrClosed):
		c.err = fmt.Errorf("%s: %w", c.s.kind(), waitErr) // the box went away
	default:
		code := st.Code
		msg := fmt.Sprintf("the %s interpreter exited with code %d while running the cell", c.s.runtimeName(), code)
		if st.Signal != 0 {
			msg = fmt.Sprintf("the %s interpreter was killed by signal %d while running the cell (the out-of-memory killer?)", c.s.runtimeName(), st.Signal)
		}
		msg += "; the session was restarted and its variables, imports and definitions are gone"
		if diag != "" {
			msg += " (" + diag + ")"
		}
		c.res.ExitCode = code
		c.res.Error = &CellError{Type: "InterpreterExited", Message: msg, Traceback: msg + "\n"}
	}
	c.mu.Unlock()
	c.end()
}

func (c *Cell) end() {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return
	default:
	}
	close(c.done)
	notify := c.notify
	c.mu.Unlock()
	c.cond.Broadcast()
	c.cancel()
	c.s.sup.release() // the next cell may start
	if notify != nil {
		notify()
	}
}

// ID numbers the cells of a session from 1; tracebacks name it "<cell-ID>".
func (c *Cell) ID() int { return c.id }

// Done is closed when the cell has ended.
func (c *Cell) Done() <-chan struct{} { return c.done }

// Next returns the next piece of output, in the order the cell wrote it, or
// io.EOF once the cell has ended and everything was read. ctx bounds the wait.
func (c *Cell) Next(ctx context.Context) (Chunk, error) {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.mu.Unlock()
		c.cond.Broadcast()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if len(c.queue) > 0 {
			ch := c.queue[0]
			c.queue = c.queue[1:]
			c.queued -= ch.size()
			c.cond.Broadcast()
			return ch, nil
		}
		if c.isDone() {
			return Chunk{}, io.EOF
		}
		if ctx.Err() != nil {
			return Chunk{}, errdefs.Errorf(errdefs.ErrTimeout, "read cell output: %v", ctx.Err())
		}
		c.cond.Wait()
	}
}

// ReadNonblock copies queued output into p without waiting: the stream (1 or
// 2) and the byte count; (0, 0, nil) when nothing is queued yet; io.EOF at
// the end. A chunk larger than p is returned over several reads.
func (c *Cell) ReadNonblock(p []byte) (stream, n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) > 0 && c.queue[0].Result != nil { // only rich cells make results: collect them
		c.take(c.queue[0])
		c.queued -= c.queue[0].size()
		c.queue = c.queue[1:]
	}
	if len(c.queue) == 0 {
		if c.isDone() {
			return 0, 0, io.EOF
		}
		return 0, 0, nil
	}
	ch := &c.queue[0]
	n = copy(p, ch.Data)
	stream = ch.Stream
	ch.Data = ch.Data[n:]
	c.queued -= n
	if len(ch.Data) == 0 {
		c.queue = c.queue[1:]
	}
	c.cond.Broadcast()
	return stream, n, nil
}

// Pending reports whether ReadNonblock would return something now.
func (c *Cell) Pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0 || c.isDone()
}

// Notify registers f, called from any goroutine whenever output arrives or
// the cell ends (the hook for event loops that poll). f must not block.
func (c *Cell) Notify(f func()) {
	c.mu.Lock()
	c.notify = f
	c.mu.Unlock()
	f()
}

func (c *Cell) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Result waits for the cell to end (ctx bounds the wait, not the cell) and
// returns what it did; Stdout and Stderr hold the output Next did not return.
func (c *Cell) Result(ctx context.Context) (CellResult, error) {
	c.mu.Lock()
	if !c.collect {
		c.collect = true
		for _, ch := range c.queue {
			c.take(ch)
		}
		c.queue, c.queued = nil, 0
	}
	c.mu.Unlock()
	c.cond.Broadcast()
	select {
	case <-c.done:
	case <-ctx.Done():
		return CellResult{}, errdefs.Errorf(errdefs.ErrTimeout, "wait for cell %d: %v", c.id, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.queue { // pushed between the collect switch and the end
		c.take(ch)
	}
	c.queue, c.queued = nil, 0
	r := c.res
	r.Stdout = append([]byte(nil), c.out.Bytes()...)
	r.Stderr = append([]byte(nil), c.errb.Bytes()...)
	r.StdoutTruncated, r.StderrTruncated = c.out.Truncated(), c.errb.Truncated()
	r.Results, r.ResultsTruncated = append([]Result(nil), c.results...), c.resDropped
	return r, c.err
}

// Interrupt sends the cell a KeyboardInterrupt now, as its timeout would;
// a cell that ignores it is killed after the grace period.
func (c *Cell) Interrupt() {
	if c.cancel != nil {
		c.cancel()
	}
}

// Close abandons the cell: its output is dropped and, if it still runs, it
// is interrupted (and killed after the grace period).
func (c *Cell) Close() {
	c.mu.Lock()
	c.discard = true
	c.queue, c.queued = nil, 0
	c.mu.Unlock()
	c.cond.Broadcast()
	c.Interrupt()
}
