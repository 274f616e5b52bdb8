package restclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// The attach's bounds: a frame from the server (a chunk of 32 KiB and its
// channel byte, or a small JSON frame), a stdin frame we send, one send,
// one dial, and how often an attach that broke is made again.
const (
	maxServerFrame = 64 << 10
	stdinChunk     = 32 << 10
	sendTimeout    = 30 * time.Second
	dialTimeout    = 30 * time.Second
	maxRedials     = 20
	redialPause    = 200 * time.Millisecond
	// pingEvery: an attach whose server does not answer a ping within
	// pingTimeout is gone (a server or network that went silent), and is
	// made again.
	pingEvery   = 30 * time.Second
	pingTimeout = 45 * time.Second
)

// Execution is a process started on the server, streamed over the
// attach WebSocket (internal/restapi/exec.go): binary frames [1|2][bytes]
// come as stdout and stderr, a text {"type":"exit"} frame ends it; stdin
// goes as binary frames, its end as {"type":"stdin_eof"}. An attach the
// server drops (a caller that did not read for the server's send timeout)
// is made again: the server keeps what it had not sent for the next one.
type Execution struct {
	Stdout, Stderr io.Reader
	Stdin          io.WriteCloser // nil unless Command.Stdin

	b     *Box
	xid   string // the server's id
	id    string // ID
	what  string // the command, quoted, for errors
	tty   bool
	limit int64
	out   [2]*stream

	ctx    context.Context // the attach's; cancelled by Close
	cancel context.CancelFunc
	// pushes counts the frames the reader has handed to a stream; pushing
	// is set while it hands one (and waits for the caller to read).
	pushes  atomic.Int64
	pushing atomic.Bool

	mu     sync.Mutex
	ws     *websocket.Conn // the current attach; nil between attaches
	wsSet  chan struct{}   // closed when ws changes
	killed bool
	notify func()

	once   sync.Once
	done   chan struct{}
	status boxlite.ExitStatus
	err    error
}

// Exec starts cmd in the box (a configured or stopped box is started
// first, as BoxLite's exec does) and attaches to it.
func (b *Box) Exec(ctx context.Context, cmd boxlite.Command) (*Execution, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: empty command (a REST runtime runs no image default)")
	}
	if cmd.Timeout < 0 || cmd.OutputLimit < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: negative timeout or output limit")
	}
	if cmd.Grace != 0 {
		return nil, unsupported("exec: a grace period")
	}
	if cmd.Tty {
		if cmd.Rows == 0 {
			cmd.Rows = boxlite.DefaultRows
		}
		if cmd.Cols == 0 {
			cmd.Cols = boxlite.DefaultCols
		}
	}
	req := wire.ExecRequest{Command: cmd.Argv[0], Args: cmd.Argv[1:], Env: cmd.Env, WorkingDir: cmd.Cwd, User: cmd.User, TTY: cmd.Tty}
	if cmd.Timeout > 0 {
		s := abi.SecondsOf(cmd.Timeout)
		req.TimeoutSeconds = &s
	}
	var resp wire.ExecResponse
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/exec"), json: req}, &resp); err != nil {
		return nil, err
	}
	if resp.ExecutionID == "" || len(resp.ExecutionID) > 128 {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "exec: the server named no valid execution")
	}
	limit := cmd.OutputLimit
	if limit == 0 {
		limit = b.c.outputLimit
	}
	e := &Execution{b: b, xid: resp.ExecutionID, id: shortID(resp.ExecutionID), what: quoteArgv(cmd.Argv), tty: cmd.Tty, limit: limit,
		out: [2]*stream{newStream(), newStream()}, wsSet: make(chan struct{}), done: make(chan struct{})}
	e.Stdout, e.Stderr = e.out[0], e.out[1]
	if cmd.Stdin {
		e.Stdin = stdinWriter{e}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	first, err := e.dial(ctx)
	if err != nil {
		e.cancel()
		_ = e.b.c.do(context.Background(), request{method: "DELETE", path: e.path("")}, nil)
		return nil, err
	}
	if !cmd.Stdin {
		err = e.control(ctx, first, map[string]any{"type": "stdin_eof"})
	}
	if err == nil && cmd.Tty && (cmd.Rows != boxlite.DefaultRows || cmd.Cols != boxlite.DefaultCols) {
		err = e.Resize(cmd.Rows, cmd.Cols)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	go e.attach(first)
	return e, nil
}

func (e *Execution) path(rest string) string { return e.b.path("/executions/" + seg(e.xid) + rest) }

// ID names the execution as BoxLite's Execution.id does (12 hex digits):
// the first 12 of the server's id, which the server's logs show whole.
func (e *Execution) ID() string { return e.id }

// Tty reports whether the process runs on a terminal.
func (e *Execution) Tty() bool { return e.tty }

// dial opens an attach and makes it the current one.
func (e *Execution) dial(ctx context.Context) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	u := e.b.c.endpoint(e.path("/attach"), nil)
	u = "ws" + strings.TrimPrefix(u, "http")
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: e.b.c.hc,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.b.c.key}}})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			defer resp.Body.Close()
			return nil, readError("attach "+e.what, resp)
		}
		return nil, transportError("attach "+e.what, err)
	}
	ws.SetReadLimit(maxServerFrame)
	e.setWS(ws)
	return ws, nil
}

func (e *Execution) setWS(ws *websocket.Conn) {
	e.mu.Lock()
	e.ws = ws
	close(e.wsSet)
	e.wsSet = make(chan struct{})
	e.mu.Unlock()
}

// attach reads the server's frames until the exit frame, making the
// attach again when it breaks.
func (e *Execution) attach(ws *websocket.Conn) {
	redials := 0
	for {
		stop := make(chan struct{})
		go e.keepalive(ws, stop)
		code, ended, progressed, err := e.readFrames(ws)
		close(stop)
		ws.CloseNow()
		e.setWS(nil)
		if ended {
			e.exit(code)
			return
		}
		if progressed {
			redials = 0 // only attaches that break without delivering anything count
		}
		// A caller that stopped reading made the server drop the attach:
		// the next one waits until there is room again.
		for i := range 2 {
			if e.out[i].waitRoom(e.ctx) != nil {
				return // Close finished it
			}
		}
		for {
			if redials++; redials > maxRedials {
				e.finish(boxlite.ExitStatus{Code: -1}, errdefs.Errorf(errdefs.ErrUnreachable, "exec %s: the attach broke %d times: %v", e.what, maxRedials, err))
				return
			}
			select {
			case <-e.ctx.Done():
				return
			case <-time.After(redialPause):
			}
			ws, err = e.dial(e.ctx)
			if err == nil {
				break
			}
			if k := errdefs.KindOf(err); k == errdefs.KindNotFound || k == errdefs.KindInvalidArgument {
				e.finish(boxlite.ExitStatus{Code: -1}, fmt.Errorf("exec %s: %w", e.what, err))
				return
			}
		}
	}
}

// keepalive pings the server on ws until stop; one that does not answer
// in time ends the attach (readFrames then returns, and it is made again).
func (e *Execution) keepalive(ws *websocket.Conn, stop <-chan struct{}) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-e.ctx.Done():
			return
		case <-t.C:
			if e.pushing.Load() {
				// The reader waits for the caller: send nothing. A ping
				// reaching a server that ended the attach meanwhile (its
				// send timeout) would sit unread there, and its close
				// would then reset the connection, dropping what our
				// socket holds of the output.
				continue
			}
			before := e.pushes.Load()
			ctx, cancel := context.WithTimeout(e.ctx, pingTimeout)
			err := ws.Ping(ctx)
			cancel()
			// A pong goes unread while the reader waits for the caller to
			// read: that attach is alive, and closing it would drop what
			// the socket holds. Only a reader reading all along and
			// hearing nothing means the server is gone.
			if err != nil && !e.pushing.Load() && e.pushes.Load() == before {
				ws.CloseNow()
				return
			}
		}
	}
}

// readFrames reads one attach to its end: the exit frame (ended) or a
// break.
func (e *Execution) readFrames(ws *websocket.Conn) (code int, ended, progressed bool, err error) {
	for {
		typ, data, err := ws.Read(e.ctx)
		if err != nil {
			return 0, false, progressed, err
		}
		if typ == websocket.MessageBinary {
			if len(data) < 1 || data[0] < 1 || data[0] > 2 {
				return 0, false, progressed, errdefs.Errorf(errdefs.ErrInternal, "the server sent a frame of no stream")
			}
			if len(data) > 1 {
				e.pushing.Store(true)
				err := e.out[data[0]-1].push(e.ctx, data[1:])
				e.pushing.Store(false)
				e.pushes.Add(1)
				if err != nil {
					return 0, false, progressed, err
				}
				progressed = true
			}
			continue
		}
		var f struct {
			Type     string `json:"type"`
			ExitCode *int   `json:"exit_code"`
		}
		if json.Unmarshal(data, &f) != nil {
			continue // a frame we do not know says nothing we need
		}
		if f.Type == "exit" && f.ExitCode != nil {
			return *f.ExitCode, true, progressed, nil
		}
	}
}

// exit ends the execution with the code the exit frame gave, asking the
// server how it ended (a timeout, a signal) while it still knows.
func (e *Execution) exit(code int) {
	st := boxlite.ExitStatus{Code: code}
	var info wire.ExecutionInfo
	var failed error // the process never ran, or its end was lost: the server's error_message
	if e.b.c.doWithin(context.Background(), infoTimeout, request{method: "GET", path: e.path("")}, &info) == nil {
		st.TimedOut = info.Status == "timed_out"
		if st.TimedOut && code > 128 && code < 128+65 {
			st.Signal = code - 128 // what ended it: SIGTERM, or SIGKILL past the grace period
		}
		switch msg := info.ErrorMessage; {
		case msg == nil || st.TimedOut:
		case strings.HasPrefix(*msg, "killed by signal"):
			if code > 128 && code < 128+65 {
				st.Signal = code - 128
			}
		default:
			failed = errdefs.New(kindOfMessage(*msg), *msg)
		}
	}
	e.mu.Lock()
	if e.killed && st.Signal == 0 && code == 128+int(syscall.SIGKILL) {
		st.Signal = int(syscall.SIGKILL)
	}
	e.mu.Unlock()
	err := failed
	if st.TimedOut {
		err = errdefs.Errorf(errdefs.ErrTimeout, "exec %s: timed out", e.what)
	}
	e.finish(st, err)
}

// kindOfMessage is the kind of an execution's error_message: the server
// writes our errors' text, which ends with its kind's sentinel
// (errdefs.Errorf's "...: not found").
func kindOfMessage(msg string) errdefs.Kind {
	for _, k := range errdefs.Kinds {
		if strings.HasSuffix(msg, ": "+k.Err.Error()) {
			return k.Kind
		}
	}
	return errdefs.KindInternal
}

func (e *Execution) finish(st boxlite.ExitStatus, err error) {
	e.once.Do(func() {
		e.status, e.err = st, err
		end := err
		if end == nil {
			end = io.EOF
		}
		close(e.done)
		e.out[0].close(end)
		e.out[1].close(end)
		e.mu.Lock()
		f := e.notify
		e.mu.Unlock()
		if f != nil {
			f()
		}
	})
}

// Done is closed when the process has ended.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Wait blocks until the process has ended and its output was received. A
// timeout returns the status and an ErrTimeout error; ctx only bounds the
// waiting.
func (e *Execution) Wait(ctx context.Context) (boxlite.ExitStatus, error) {
	select {
	case <-e.done:
		return e.status, e.err
	case <-ctx.Done():
		return boxlite.ExitStatus{Code: -1}, errdefs.Errorf(errdefs.ErrTimeout, "wait for exec %s: %v", e.what, ctx.Err())
	}
}

// Notify registers f, called whenever output arrives or the process ends.
func (e *Execution) Notify(f func()) {
	e.mu.Lock()
	e.notify = f
	e.mu.Unlock()
	e.out[0].setNotify(f)
	e.out[1].setNotify(f)
	f()
}

// ReadNonblock reads what is buffered of fd 1 or 2; (0, nil) when nothing
// is, (0, io.EOF) at the end.
func (e *Execution) ReadNonblock(fd int, p []byte) (int, error) {
	if fd != 1 && fd != 2 {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "read: fd %d is neither 1 (stdout) nor 2 (stderr)", fd)
	}
	return e.out[fd-1].read(p, false)
}

// Pending reports whether a read of fd would return now.
func (e *Execution) Pending(fd int) bool {
	if fd != 1 && fd != 2 {
		return false
	}
	return e.out[fd-1].pending()
}

func (e *Execution) ended(op string) error {
	select {
	case <-e.done:
		return errdefs.Errorf(errdefs.ErrInvalidState, "%s exec %s: process has exited", op, e.what)
	default:
		return nil
	}
}

// Signal delivers sig to the process; SIGKILL is Kill.
func (e *Execution) Signal(sig syscall.Signal) error { return e.signal(sig, false) }

// SignalGroup delivers sig to the process's group (the server's
// process_group extension); SIGKILL is Kill, which ends the group too.
func (e *Execution) SignalGroup(sig syscall.Signal) error { return e.signal(sig, true) }

func (e *Execution) signal(sig syscall.Signal, group bool) error {
	if err := e.ended("signal"); err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		return e.Kill()
	}
	return e.b.c.doWithin(context.Background(), infoTimeout, request{method: "POST", path: e.path("/signal"),
		json: wire.SignalRequest{Signal: int(sig), ProcessGroup: group}}, nil)
}

// Resize sets the size of the process's terminal.
func (e *Execution) Resize(rows, cols int) error {
	if !e.tty {
		return errdefs.Errorf(errdefs.ErrInvalidState, "resize exec %s: it has no terminal (Command.Tty)", e.what)
	}
	if err := e.ended("resize"); err != nil {
		return err
	}
	return e.b.c.doWithin(context.Background(), infoTimeout, request{method: "POST", path: e.path("/resize"),
		json: wire.ResizeRequest{Rows: rows, Cols: cols}}, nil)
}

// Kill ends the process and its group with SIGKILL (the server's DELETE);
// its exit still comes through the attach.
func (e *Execution) Kill() error {
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	return e.b.c.doWithin(context.Background(), infoTimeout, request{method: "DELETE", path: e.path("")}, nil)
}

// Close abandons the execution: a running process is killed with its
// group and its remaining output dropped.
func (e *Execution) Close() error {
	select {
	case <-e.done:
		e.cancel()
		return nil
	default:
	}
	// Ended here first, so that the exit the kill brings cannot win.
	closed := errdefs.Errorf(errdefs.ErrClosed, "exec %s: closed", e.what)
	e.out[0].drop(closed)
	e.out[1].drop(closed)
	e.finish(boxlite.ExitStatus{Code: -1}, closed)
	e.cancel()
	err := e.Kill()
	if errdefs.KindOf(err) == errdefs.KindNotFound {
		err = nil // ended and forgotten meanwhile
	}
	return err
}

// current is the attach to send on, waiting (bounded) for one to be made.
func (e *Execution) current(ctx context.Context) (*websocket.Conn, error) {
	for {
		e.mu.Lock()
		ws, set := e.ws, e.wsSet
		e.mu.Unlock()
		if ws != nil {
			return ws, nil
		}
		if err := e.ended("write to"); err != nil {
			return nil, errdefs.Errorf(errdefs.ErrClosed, "stdin: process has exited")
		}
		select {
		case <-set:
		case <-e.done:
		case <-ctx.Done():
			return nil, errdefs.Errorf(errdefs.ErrTimeout, "exec %s: no attach to send on: %v", e.what, ctx.Err())
		}
	}
}

// send sends one frame on the current attach, once more on the next if
// that one broke under it.
func (e *Execution) send(typ websocket.MessageType, p []byte) error {
	ctx, cancel := context.WithTimeout(e.ctx, sendTimeout)
	defer cancel()
	var err error
	for range 2 {
		var ws *websocket.Conn
		if ws, err = e.current(ctx); err != nil {
			return err
		}
		if err = ws.Write(ctx, typ, p); err == nil {
			return nil
		}
		e.mu.Lock()
		if e.ws == ws {
			e.ws = nil // the reader will make the next
		}
		e.mu.Unlock()
	}
	if e.ended("write to") != nil {
		return errdefs.Errorf(errdefs.ErrClosed, "stdin: process has exited")
	}
	return transportError("exec "+e.what+": send", err)
}

func (e *Execution) control(ctx context.Context, ws *websocket.Conn, v any) error {
	data, _ := json.Marshal(v)
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := ws.Write(sctx, websocket.MessageText, data); err != nil {
		return transportError("exec "+e.what+": send", err)
	}
	return nil
}

type stdinWriter struct{ e *Execution }

func (w stdinWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, stdinChunk)
		if err := w.e.send(websocket.MessageBinary, p[done:done+n]); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// Close ends stdin. As on a local runtime, closing the stdin of a process
// that has exited is no error (it raced the exit, which is not the
// caller's fault); a write after the exit is.
func (w stdinWriter) Close() error {
	if w.e.ended("") != nil {
		return nil
	}
	data, _ := json.Marshal(map[string]string{"type": "stdin_eof"})
	if err := w.e.send(websocket.MessageText, data); err != nil && w.e.ended("") == nil {
		return err
	}
	return nil
}
