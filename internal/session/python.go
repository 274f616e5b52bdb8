package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// Python is a persistent Python interpreter in a box: each Run is a cell
// that sees the globals, imports and definitions of the cells before it.
// Cells run one at a time (Run waits for the cell before); a Python session
// is safe for concurrent use.
type Python struct {
	lang  string // "python", or "javascript" (NewJavaScript)
	start Starter
	opts  Options
	grace time.Duration
	sup   *supervisor[*interp]

	python string // the interpreter that worked, tried first next time: launch's, which runs one at a time
	nextID int    // the last cell's: RunStream's, under the busy turn
}

// NewPython starts a Python interpreter with start, ready for cells. It
// fails with ErrNotFound when there is no Python 3.
// onBusy (nil: none) is told when each cell begins and ends.
func NewPython(ctx context.Context, start Starter, opts Options, onBusy BusyFunc) (*Python, error) {
	return newDriverSession(ctx, "python", start, opts, onBusy)
}

// NewJavaScript starts a Node interpreter (node, else nodejs, on the box's
// PATH) with a driver that speaks the Python driver's protocol (driver.js):
// a JavaScript session, which is a Python in every other respect (cells,
// streams, timeouts, interrupts, Reset). Each cell runs in the
// interpreter's global scope (vm.runInThisContext), so its var, let, const,
// function and class declarations are there for the next; the value of
// its last expression is its value (a promise is awaited first). It fails
// with ErrNotFound when the box has no Node; Options.Python is ignored.
func NewJavaScript(ctx context.Context, start Starter, opts Options, onBusy BusyFunc) (*Python, error) {
	return newDriverSession(ctx, "javascript", start, opts, onBusy)
}

func newDriverSession(ctx context.Context, lang string, start Starter, opts Options, onBusy BusyFunc) (*Python, error) {
	what := lang + " session"
	if err := opts.check(what); err != nil {
		return nil, err
	}
	s := &Python{lang: lang, start: start, opts: opts, grace: opts.grace()}
	s.sup = newSupervisor(what, "cell", s.launch, onBusy)
	s.sup.keep = opts.Name != ""
	if _, err := s.sup.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Language is "python" or "javascript".
func (s *Python) Language() string { return s.lang }

func (s *Python) kind() string { return s.lang + " session" }

// runtimeName names the interpreter in messages.
func (s *Python) runtimeName() string {
	if s.lang == "javascript" {
		return "Node"
	}
	return "Python"
}

// interruptName is what an interrupt raises in a cell.
func (s *Python) interruptName() string {
	if s.lang == "javascript" {
		return "SIGINT"
	}
	return "KeyboardInterrupt"
}

// Pid is the interpreter's process id in the box (0 while none runs).
func (s *Python) Pid() int {
	if p := s.sup.current(); p != nil {
		return p.hello.Pid
	}
	return 0
}

// PythonVersion is the interpreter's version, e.g. "3.11.2" (Node's,
// e.g. "v18.19.0", in a JavaScript session).
func (s *Python) PythonVersion() string {
	if p := s.sup.current(); p != nil {
		return p.hello.Python
	}
	return ""
}

// Restarts counts the interpreters started after the first (Reset, or one
// that was killed or died under a cell).
func (s *Python) Restarts() int { return s.sup.restarts() }

// Run runs code as one cell and returns what it did. An exception in the
// cell is a result (CellResult.Error), not an error. A timeout (0: none)
// interrupts the cell with KeyboardInterrupt and returns ErrTimeout, with the
// output so far; the session keeps its state. A cell that does not stop
// within the grace period is killed with its interpreter, which is started
// again: the error wraps ErrTimeout and ErrRestarted. Cancelling ctx
// interrupts the cell likewise.
func (s *Python) Run(ctx context.Context, code string, timeout time.Duration) (CellResult, error) {
	c, err := s.RunStream(ctx, code, timeout)
	if err != nil {
		return CellResult{}, err
	}
	return c.Result(context.Background()) // the cell ends: ctx and the timeout interrupt it
}

// RunStream starts a cell and returns it, to read its output while it runs
// (Cell.Next) and then its result (Cell.Result). Timeout and ctx work as for
// Run, for the whole life of the cell.
func (s *Python) RunStream(ctx context.Context, code string, timeout time.Duration) (*Cell, error) {
	return s.RunStreamOpts(ctx, code, RunOptions{Timeout: timeout})
}

// RunOptions are how a cell runs (RunStreamOpts).
type RunOptions struct {
	Timeout time.Duration // 0: none
	// Rich makes the cell a code context's: its results (Cell.Next's
	// StreamResult chunks, CellResult.Results) are MIME bundles of the
	// trailing expression's value, of display() calls and of the
	// matplotlib figures open at its end; "!cmd" lines run in the shell.
	Rich bool
	// Env is set in the interpreter's environment (os.environ,
	// process.env) for this cell only.
	Env map[string]string
}

// RunStreamOpts is RunStream with options.
func (s *Python) RunStreamOpts(ctx context.Context, code string, o RunOptions) (*Cell, error) {
	timeout := o.Timeout
	what := s.kind()
	if timeout < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: negative timeout", what)
	}
	if len(code) > maxCellCode {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "%s: cell of %d bytes exceeds %d", what, len(code), maxCellCode)
	}
	if err := checkEnv(what, o.Env); err != nil {
		return nil, err
	}
	if err := s.sup.acquire(ctx); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var p *interp
	var c *Cell
	for attempt := 0; ; attempt++ {
		var err error
		if p, err = s.sup.ensure(ctx); err != nil {
			cancel()
			s.sup.release()
			return nil, err
		}
		s.nextID++
		c = newCell(s, p, s.nextID, timeout, o.Rich)
		c.cancel = cancel
		if p.attach(c) {
			break
		}
		if attempt > 0 {
			cancel()
			s.sup.release()
			return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s: the interpreter keeps exiting: %s", s.kind(), p.why())
		}
	}
	msg, err := runRequest(c.id, code, o.Rich, o.Env)
	if err != nil {
		p.fail(err)
		return c, nil // the cell ends with the error
	}
	go c.supervise(cctx)
	go p.send(msg)
	return c, nil
}

// Interrupt stops the cell running now as its timeout would
// (KeyboardInterrupt, then the interpreter is killed and restarted after the
// grace period); a no-op when idle.
func (s *Python) Interrupt() {
	if p := s.sup.current(); p != nil {
		if c := p.running(); c != nil {
			c.Interrupt()
		}
	}
}

// Reset starts a fresh interpreter: a running cell is stopped (its Run
// returns ErrClosed) and every global, import and definition is gone.
func (s *Python) Reset(ctx context.Context) error { return s.sup.reset(ctx) }

// Close stops the interpreter; a running cell's Run returns ErrClosed.
// Closing twice is a no-op.
func (s *Python) Close() error { return s.sup.close() }

// launch starts an interpreter and waits for the driver's hello.
func (s *Python) launch(ctx context.Context) (*interp, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if s.lang == "javascript" {
		return s.launchOne(ctx, "node")
	}
	cands := DefaultPythons
	if s.opts.Python != "" {
		cands = []string{s.opts.Python}
	} else if s.python != "" {
		cands = append([]string{s.python}, cands...)
	}
	var tried []string
	for _, py := range cands {
		p, err := s.launchOne(ctx, py)
		if err == nil {
			s.python = py
			return p, nil
		}
		if !errors.Is(err, errdefs.ErrNotFound) || s.opts.Python != "" {
			return nil, err
		}
		tried = append(tried, py)
	}
	return nil, errdefs.Errorf(errdefs.ErrNotFound, "python session: no Python interpreter in the box (tried %s)", strings.Join(tried, ", "))
}

func (s *Python) launchOne(ctx context.Context, python string) (*interp, error) {
	argv := PythonArgv(python)
	if s.lang == "javascript" {
		argv = JavaScriptArgv()
	}
	sp, err := s.start(ctx, argv, s.opts.qualified(s.lang))
	if err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", s.kind(), python, err)
	}
	if adopted(sp) {
		// A named session's interpreter, running since an earlier client:
		// it says hello again, after whatever that client left unread.
		if _, err := sp.Stdin().Write(helloRequest()); err != nil {
			detachOrKill(sp)
			return nil, fmt.Errorf("%s: take over %s: %w", s.kind(), s.opts.Name, err)
		}
	}
	p := &interp{s: s, p: sp, gone: make(chan struct{}), errTail: &tail{max: stderrTailBytes}, errDone: make(chan struct{})}
	go func() {
		var w io.Writer = p.errTail
		if s.lang == "javascript" {
			// node's fds 1 and 2 are this stream (driver.js): what a cell's
			// child process writes there is the cell's stderr.
			w = io.MultiWriter(p.errTail, cellStderr{p})
		}
		io.Copy(w, sp.Stderr())
		close(p.errDone)
	}()
	br := bufio.NewReaderSize(sp.Stdout(), 64<<10)
	type hello struct {
		h   driverHello
		err error
	}
	ch := make(chan hello, 1)
	go func() {
		var h hello
		h.err = readHello(br, &h.h)
		ch <- h
	}()
	var h hello
	select {
	case h = <-ch:
	case <-ctx.Done():
		sp.Kill()
		<-ch
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "%s: %s did not start the driver: %v", s.kind(), python, ctx.Err())
	}
	if h.err != nil {
		sp.Kill()
		st, werr := sp.Wait()
		p.waitStderr()
		if werr != nil && !errors.Is(werr, errdefs.ErrClosed) {
			return nil, fmt.Errorf("%s: start %s: %w", s.kind(), python, werr)
		}
		if s.lang == "javascript" && st.Code == 127 {
			return nil, errdefs.Errorf(errdefs.ErrNotFound, "javascript session: no node or nodejs on the box's PATH")
		}
		msg := fmt.Sprintf("%s: %s did not start the session driver (%v", s.kind(), python, h.err)
		if st.Code > 0 {
			msg += fmt.Sprintf(", exit code %d", st.Code)
		}
		msg += ")"
		if t := p.errTail.String(); t != "" {
			msg += ": " + t
		}
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s", msg)
	}
	p.hello = h.h
	go p.read(br)
	return p, nil
}
