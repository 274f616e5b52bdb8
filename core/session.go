package core

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// Persistent sessions (DESIGN.md, decision 9): a long-lived interpreter in the
// box that runs cells and keeps their state. A Python session is a small
// driver (session_driver.py, embedded here and passed to the interpreter on
// its command line, so any image with Python 3 works) that talks to the host
// over its exec's stdin and stdout; the cells' own output travels inside that
// protocol, so nothing a cell prints can be taken for protocol.

//go:embed session_driver.py
var driverSource string

// driverBoot compiles the driver under a name of its own, so tracebacks can
// leave its frames out.
const driverBoot = `import sys;exec(compile(sys.argv.pop(1),"<boxlite-session>","exec"))`

var driverMagic = []byte("\x00\x01BOXLITE-SESSION-1\n")

// Python interpreters a session tries, in order, when SessionOptions.Python is empty.
var defaultPythons = []string{"/usr/local/bin/python3", "python3", "python"}

// defaultShell is a shell session's unless SessionOptions.Shell names one.
const defaultShell = "/bin/sh"

const (
	defaultSessionGrace = 3 * time.Second
	sessionStartTimeout = 2 * time.Minute
	maxDriverFrame      = 16 << 20 // results carry a repr capped at 1 MiB, output frames 64 KiB
	maxDriverJunk       = 1 << 20  // bytes an interpreter may print before the driver's magic
	maxCellCode         = 64 << 20
	cellQueueBytes      = 1 << 20 // streamed output buffered before the interpreter is made to wait
	idleOutputBytes     = 1 << 20 // output between cells kept for the next cell
	stderrTailBytes     = 4 << 10
)

// ErrSessionRestarted is wrapped, with ErrTimeout, by the error of a cell or
// command that did not stop when interrupted: its interpreter or shell was
// killed and started again, and the session's state is gone.
var ErrSessionRestarted = errors.New("session restarted")

// SessionOptions configures a session (Box.NewPythonSession, Box.NewShellSession).
type SessionOptions struct {
	// Python is the interpreter of a Python session. Default: the first of
	// /usr/local/bin/python3, python3 and python (on the box's PATH) that exists.
	Python string
	// Shell is the shell of a shell session. Default: /bin/sh.
	Shell string
	Env   map[string]string // added to the image's and the box's environment
	Cwd   string            // default: the box's, else the image's working directory
	User  string            // default: the box's, else the image's user
	// Grace is how long an interrupted cell or command has to stop before its
	// interpreter or shell is killed and restarted (losing the session's
	// state). Default 3s.
	Grace time.Duration
	// OutputLimit caps how many bytes of each stream a cell's result or a
	// shell command's result keeps; the rest is dropped and the result is
	// marked truncated. Default: the runtime's (DefaultOutputLimit, 64 MiB).
	OutputLimit int64
}

func (o SessionOptions) grace() time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return defaultSessionGrace
}

func (o SessionOptions) check(what string) error {
	if o.Grace < 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: negative grace period", what)
	}
	if o.OutputLimit < 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: negative output limit", what)
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: env key %q is invalid", what, k)
		}
	}
	return nil
}

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
}

// Chunk is output a running cell wrote.
type Chunk struct {
	Stream int // 1 stdout, 2 stderr
	Data   []byte
}

// ---- the process under a session ----

// sessionProc is a session's interpreter or shell as the session drives it:
// an Execution in a box, or a local process in tests.
type sessionProc interface {
	stdin() io.WriteCloser
	stdout() io.Reader
	stderr() io.Reader
	signal(sig syscall.Signal) error
	signalGroup(sig syscall.Signal) error // the process and its process group
	kill() error                          // the whole process group, abandoning the output
	wait() (ExitStatus, error)            // after the outputs ended
}

type procStarter func(ctx context.Context, argv []string, o SessionOptions) (sessionProc, error)

// execProc is a session process in a box.
type execProc struct {
	b    *Box
	e    *Execution
	user string
}

func (p execProc) stdin() io.WriteCloser           { return p.e.Stdin }
func (p execProc) stdout() io.Reader               { return p.e.Stdout }
func (p execProc) stderr() io.Reader               { return p.e.Stderr }
func (p execProc) signal(sig syscall.Signal) error { return p.e.Signal(sig) }
func (p execProc) kill() error                     { return p.e.Close() }
func (p execProc) wait() (ExitStatus, error)       { return p.e.Wait(context.Background()) }
func (p execProc) signalGroup(sig syscall.Signal) error {
	// The agent signals processes, not groups: ask the box's shell. The
	// session process leads its group (the agent starts every exec so).
	pid := p.e.Pid()
	if pid <= 0 {
		return p.e.Signal(sig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// dash needs "--" before a negative pid; busybox refuses it.
	script := `kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "-$2"`
	res, err := p.b.Run(ctx, Command{Argv: []string{"sh", "-c", script, "sh", signalName(sig), fmt.Sprint(pid)}, User: p.user, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	if res.Code != 0 {
		return fmt.Errorf("kill -%s -%d: exit %d: %s", signalName(sig), pid, res.Code, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGKILL:
		return "KILL"
	}
	return fmt.Sprint(int(sig))
}

func (b *Box) sessionStarter() procStarter {
	return func(ctx context.Context, argv []string, o SessionOptions) (sessionProc, error) {
		e, err := b.Exec(ctx, Command{Argv: argv, Env: o.Env, Cwd: o.Cwd, User: o.User, Stdin: true})
		if err != nil {
			return nil, err
		}
		return execProc{b: b, e: e, user: o.User}, nil
	}
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
}

// ---- Python sessions ----

// Session is a persistent Python interpreter in a box: each Run is a cell
// that sees the globals, imports and definitions of the cells before it.
// Cells run one at a time (Run waits for the cell before); a Session is safe
// for concurrent use.
type Session struct {
	start procStarter
	opts  SessionOptions
	grace time.Duration

	busy chan struct{} // holds one token while a cell runs

	mu       sync.Mutex
	proc     *pyProc
	starting chan struct{} // closed when the start under way ends
	closed   bool
	launches int // interpreters started
	nextID   int
	python   string // the interpreter that worked, tried first next time
}

// NewPythonSession starts a Python interpreter in the box, ready for cells.
// It fails with ErrNotFound when the image has no Python 3.
func (b *Box) NewPythonSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	return newPythonSession(ctx, b.sessionStarter(), b.sessionDefaults(opts))
}

// sessionDefaults fills in what a session takes from its box's runtime.
func (b *Box) sessionDefaults(o SessionOptions) SessionOptions {
	if o.OutputLimit == 0 {
		o.OutputLimit = b.rt.outputLimit
	}
	return o
}

func newPythonSession(ctx context.Context, start procStarter, opts SessionOptions) (*Session, error) {
	if err := opts.check("python session"); err != nil {
		return nil, err
	}
	s := &Session{start: start, opts: opts, grace: opts.grace(), busy: make(chan struct{}, 1)}
	if _, err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Pid is the interpreter's process id in the box (0 while none runs).
func (s *Session) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.hello.Pid
}

// PythonVersion is the interpreter's version, e.g. "3.11.2".
func (s *Session) PythonVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.proc.hello.Python
}

// Restarts counts the interpreters started after the first (Reset, or one
// that was killed or died under a cell).
func (s *Session) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.launches-1, 0)
}

// Run runs code as one cell and returns what it did. An exception in the
// cell is a result (CellResult.Error), not an error. A timeout (0: none)
// interrupts the cell with KeyboardInterrupt and returns ErrTimeout, with the
// output so far; the session keeps its state. A cell that does not stop
// within the grace period is killed with its interpreter, which is started
// again: the error wraps ErrTimeout and ErrSessionRestarted. Cancelling ctx
// interrupts the cell likewise.
func (s *Session) Run(ctx context.Context, code string, timeout time.Duration) (CellResult, error) {
	c, err := s.RunStream(ctx, code, timeout)
	if err != nil {
		return CellResult{}, err
	}
	return c.Result(context.Background()) // the cell ends: ctx and the timeout interrupt it
}

// RunStream starts a cell and returns it, to read its output while it runs
// (Cell.Next) and then its result (Cell.Result). Timeout and ctx work as for
// Run, for the whole life of the cell.
func (s *Session) RunStream(ctx context.Context, code string, timeout time.Duration) (*Cell, error) {
	if timeout < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "python session: negative timeout")
	}
	if len(code) > maxCellCode {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "python session: cell of %d bytes exceeds %d", len(code), maxCellCode)
	}
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "python session: waiting for the cell before: %v", ctx.Err())
	}
	cctx, cancel := context.WithCancel(ctx)
	var p *pyProc
	var c *Cell
	for attempt := 0; ; attempt++ {
		var err error
		if p, err = s.ensure(ctx); err != nil {
			cancel()
			<-s.busy
			return nil, err
		}
		s.mu.Lock()
		s.nextID++
		id := s.nextID
		s.mu.Unlock()
		c = newCell(s, p, id, timeout)
		c.cancel = cancel
		if p.attach(c) {
			break
		}
		if attempt > 0 {
			cancel()
			<-s.busy
			return nil, errdefs.Errorf(errdefs.ErrInvalidState, "python session: the interpreter keeps exiting: %s", p.why())
		}
	}
	// json.Marshal turns invalid UTF-8 into U+FFFD.
	req, err := json.Marshal(struct {
		Op   string `json:"op"`
		ID   int    `json:"id"`
		Code string `json:"code"`
	}{"run", c.id, code})
	if err != nil {
		p.fail(err)
		return c, nil // the cell ends with the error
	}
	msg := make([]byte, 4, 4+len(req))
	binary.BigEndian.PutUint32(msg, uint32(len(req)))
	msg = append(msg, req...)
	go c.supervise(cctx)
	go func() {
		// Stdin takes the cell as the interpreter reads it; the interpreter
		// is idle, so this blocks only for cells larger than the window.
		if _, err := p.p.stdin().Write(msg); err != nil {
			p.fail(fmt.Errorf("send the cell: %w", err))
		}
	}()
	return c, nil
}

// Interrupt stops the cell running now as its timeout would
// (KeyboardInterrupt, then the interpreter is killed and restarted after the
// grace period); a no-op when idle.
func (s *Session) Interrupt() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	c := p.cell
	p.mu.Unlock()
	if c != nil {
		c.Interrupt()
	}
}

// Reset starts a fresh interpreter: a running cell is stopped (its Run
// returns ErrClosed) and every global, import and definition is gone.
func (s *Session) Reset(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrClosed, "reset python session: it is closed")
	}
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.stop(errdefs.Errorf(errdefs.ErrClosed, "python session: the session was reset"))
	}
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return errdefs.Errorf(errdefs.ErrTimeout, "reset python session: %v", ctx.Err())
	}
	defer func() { <-s.busy }()
	_, err := s.ensure(ctx)
	return err
}

// Close stops the interpreter; a running cell's Run returns ErrClosed.
// Closing twice is a no-op.
func (s *Session) Close() error {
	s.mu.Lock()
	p := s.proc
	s.closed, s.proc = true, nil
	s.mu.Unlock()
	if p != nil {
		p.stop(errdefs.Errorf(errdefs.ErrClosed, "python session: closed"))
	}
	return nil
}

// ensure returns the running interpreter, starting one (or waiting for the
// start under way) if there is none.
func (s *Session) ensure(ctx context.Context) (*pyProc, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errdefs.Errorf(errdefs.ErrClosed, "python session: it is closed")
		}
		if p := s.proc; p != nil && !p.isDead() {
			s.mu.Unlock()
			return p, nil
		}
		if ch := s.starting; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, errdefs.Errorf(errdefs.ErrTimeout, "python session: waiting for the interpreter to start: %v", ctx.Err())
			}
		}
		ch := make(chan struct{})
		s.starting = ch
		s.mu.Unlock()
		p, err := s.launch(ctx)
		s.mu.Lock()
		s.starting = nil
		if err == nil {
			if s.closed {
				p.stop(errdefs.Errorf(errdefs.ErrClosed, "python session: closed"))
				err = errdefs.Errorf(errdefs.ErrClosed, "python session: it is closed")
			} else {
				s.proc = p
				s.launches++
			}
		}
		s.mu.Unlock()
		close(ch)
		return p, err
	}
}

// restartLater replaces an interpreter that died under a cell, in the
// background, so the next cell finds one warm.
func (s *Session) restartLater(dead *pyProc) {
	s.mu.Lock()
	if s.closed || s.proc != dead {
		s.mu.Unlock()
		return
	}
	s.proc = nil
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sessionStartTimeout)
		defer cancel()
		s.ensure(ctx) // a failure is the next Run's to report
	}()
}

// launch starts an interpreter and waits for the driver's hello.
func (s *Session) launch(ctx context.Context) (*pyProc, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
	defer cancel()
	cands := defaultPythons
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

// pythonArgv runs the session driver in python.
func pythonArgv(python string) []string {
	return []string{python, "-u", "-c", driverBoot, driverSource}
}

func (s *Session) launchOne(ctx context.Context, python string) (*pyProc, error) {
	argv := pythonArgv(python)
	sp, err := s.start(ctx, argv, s.opts)
	if err != nil {
		return nil, fmt.Errorf("python session: start %s: %w", python, err)
	}
	p := &pyProc{s: s, p: sp, dead: make(chan struct{}), errTail: &tail{max: stderrTailBytes}, errDone: make(chan struct{})}
	go func() {
		io.Copy(p.errTail, sp.stderr())
		close(p.errDone)
	}()
	br := bufio.NewReaderSize(sp.stdout(), 64<<10)
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
		sp.kill()
		<-ch
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "python session: %s did not start the driver: %v", python, ctx.Err())
	}
	if h.err != nil {
		sp.kill()
		st, werr := sp.wait()
		p.waitStderr()
		if werr != nil && !errors.Is(werr, errdefs.ErrClosed) {
			return nil, fmt.Errorf("python session: start %s: %w", python, werr)
		}
		msg := fmt.Sprintf("python session: %s did not start the session driver (%v", python, h.err)
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

type driverHello struct {
	Version    int    `json:"version"`
	Pid        int    `json:"pid"`
	Python     string `json:"python"`
	Executable string `json:"executable"`
}

type driverResult struct {
	ID       int        `json:"id"`
	Value    *string    `json:"value"`
	Error    *CellError `json:"error"`
	ExitCode int        `json:"exit_code"`
}

// readHello skips what the interpreter printed before the driver's magic,
// then reads the hello frame.
func readHello(br *bufio.Reader, h *driverHello) error {
	var seen int
	last := driverMagic[len(driverMagic)-1]
	var window []byte
	for {
		b, err := br.ReadBytes(last)
		seen += len(b)
		if err != nil {
			return fmt.Errorf("no hello: %w", err)
		}
		window = append(window, b...)
		if bytes.HasSuffix(window, driverMagic) {
			break
		}
		if len(window) > len(driverMagic) {
			window = window[len(window)-len(driverMagic):]
		}
		if seen > maxDriverJunk {
			return fmt.Errorf("no hello in the first %d bytes of output", maxDriverJunk)
		}
	}
	typ, payload, err := readDriverFrame(br)
	if err != nil {
		return err
	}
	if typ != 'H' {
		return fmt.Errorf("frame %q before the hello", typ)
	}
	if err := json.Unmarshal(payload, h); err != nil {
		return fmt.Errorf("hello: %v", err)
	}
	if h.Version != 1 {
		return fmt.Errorf("driver protocol version %d, want 1", h.Version)
	}
	return nil
}

func readDriverFrame(br *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxDriverFrame {
		return 0, nil, errdefs.Errorf(errdefs.ErrLimit, "driver frame %q claims %d bytes, limit %d", hdr[0], n, maxDriverFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

// pyProc is one interpreter of a session and the goroutine reading its frames.
type pyProc struct {
	s       *Session
	p       sessionProc
	hello   driverHello
	errTail *tail
	errDone chan struct{} // closed when stderr has ended

	mu       sync.Mutex
	cell     *Cell   // the cell running, nil between cells
	idle     []Chunk // output written between cells, for the next one
	idleSize int
	dropped  int
	dead     chan struct{} // closed when the interpreter is gone
	stopped  error         // set when the host stopped it on purpose (Close, Reset)
	protoErr error         // a broken frame, or a failed write of a cell
}

// waitStderr gives the stderr copy a moment to catch up with an exit.
func (p *pyProc) waitStderr() {
	select {
	case <-p.errDone:
	case <-time.After(time.Second):
	}
}

func (p *pyProc) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// attach makes c the running cell; false if the interpreter is gone.
func (p *pyProc) attach(c *Cell) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isDead() || p.cell != nil {
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

func (p *pyProc) why() string {
	if t := p.errTail.String(); t != "" {
		return t
	}
	return "no diagnostics"
}

// stop kills the interpreter on purpose; its running cell fails with err.
func (p *pyProc) stop(err error) {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = err
	}
	p.mu.Unlock()
	p.p.kill()
}

// fail kills an interpreter the session can no longer talk to.
func (p *pyProc) fail(err error) {
	p.mu.Lock()
	if p.protoErr == nil {
		p.protoErr = err
	}
	p.mu.Unlock()
	p.p.kill()
}

// read dispatches the driver's frames until the interpreter is gone.
func (p *pyProc) read(br *bufio.Reader) {
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
				break
			}
			p.mu.Lock()
			c := p.cell
			p.mu.Unlock()
			switch typ {
			case 'O', 'E':
				ch := Chunk{Stream: 1, Data: payload}
				if typ == 'E' {
					ch.Stream = 2
				}
				if c != nil {
					c.push(ch)
					continue
				}
				p.mu.Lock()
				if p.idleSize+len(payload) <= idleOutputBytes {
					p.idle = append(p.idle, ch)
					p.idleSize += len(payload)
				} else {
					p.dropped += len(payload)
				}
				p.mu.Unlock()
			case 'S':
				if c != nil {
					c.markStarted()
				}
			case 'R':
				var r driverResult
				if jerr := json.Unmarshal(payload, &r); jerr != nil {
					err = fmt.Errorf("result: %v", jerr)
				} else if c == nil || r.ID != c.id {
					err = fmt.Errorf("result of cell %d, which is not running", r.ID)
				}
				if err != nil {
					break
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
				err = fmt.Errorf("unknown frame type %q", typ)
			}
			if err != nil {
				break
			}
		}
		return err
	}()
	if !errors.Is(err, io.EOF) {
		p.mu.Lock()
		stopped := p.stopped != nil
		if p.protoErr == nil && !stopped {
			p.protoErr = err
		}
		p.mu.Unlock()
	}
	p.p.kill() // whatever the reason, this interpreter is done
	st, werr := p.p.wait()
	p.waitStderr()
	p.mu.Lock()
	close(p.dead)
	c := p.cell
	p.cell = nil
	stopped, protoErr := p.stopped, p.protoErr
	p.mu.Unlock()
	if c != nil {
		c.abort(st, werr, stopped, protoErr, p.errTail.String())
	}
	if stopped == nil {
		p.s.restartLater(p)
	}
}

// Cell is a running cell (Session.RunStream). Read its output with Next (or
// ReadNonblock) while it runs, then call Result; or call Result alone, which
// collects all of it. Output not read blocks the cell once 1 MiB is queued,
// as a pipe would.
type Cell struct {
	s       *Session
	p       *pyProc
	id      int
	timeout time.Duration
	cancel  context.CancelFunc

	started chan struct{}
	done    chan struct{}

	mu          sync.Mutex
	cond        *sync.Cond
	queue       []Chunk
	queued      int
	collect     bool // Result was called: take output without bound
	discard     bool // Close was called: drop output
	out, errb   *capBuffer
	notify      func()
	interrupted bool   // SIGINT was sent
	killed      bool   // the cell ignored it and the interpreter was killed
	why         string // "timed out after 1s", "cancelled"
	res         CellResult
	err         error
}

func newCell(s *Session, p *pyProc, id int, timeout time.Duration) *Cell {
	c := &Cell{s: s, p: p, id: id, timeout: timeout, started: make(chan struct{}), done: make(chan struct{}),
		out: newCapBuffer(s.opts.OutputLimit), errb: newCapBuffer(s.opts.OutputLimit)}
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
		c.queued += len(ch.Data)
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
	if err := c.p.p.signal(syscall.SIGINT); err != nil {
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
	c.p.p.kill()
}

// complete ends the cell with the driver's result.
func (c *Cell) complete(r driverResult) {
	c.mu.Lock()
	c.res = CellResult{Value: r.Value, Error: r.Error, ExitCode: r.ExitCode}
	if c.interrupted {
		c.res.TimedOut = true
		c.err = errdefs.Errorf(errdefs.ErrTimeout, "python session: cell %s: it was interrupted (KeyboardInterrupt); the session keeps its state", c.why)
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
		c.err = fmt.Errorf("python session: cell %s and did not stop within %s of the interrupt (KeyboardInterrupt): "+
			"the interpreter was killed and restarted, so the session's variables, imports and definitions are gone: %w: %w",
			c.why, c.s.grace, errdefs.ErrTimeout, ErrSessionRestarted)
	case stopped != nil:
		c.err = stopped
	case protoErr != nil:
		c.err = errdefs.Errorf(errdefs.ErrInternal, "python session: lost the interpreter (%v); it was restarted and the session's state is gone", protoErr)
	case waitErr != nil && !errors.Is(waitErr, errdefs.ErrClosed):
		c.err = fmt.Errorf("python session: %w", waitErr) // the box went away
	default:
		code := st.Code
		msg := fmt.Sprintf("the Python interpreter exited with code %d while running the cell", code)
		if st.Signal != 0 {
			msg = fmt.Sprintf("the Python interpreter was killed by signal %d while running the cell (the out-of-memory killer?)", st.Signal)
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
	<-c.s.busy // the next cell may start
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
			c.queued -= len(ch.Data)
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
