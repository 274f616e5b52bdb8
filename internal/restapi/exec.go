package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"syscall"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
	"github.com/coder/websocket"
)

// maxExecTimeout bounds an execution's timeout_seconds.
const maxExecTimeout = 24 * time.Hour

// Attach's bounds and rhythm: a client's frame (stdin or control), a send
// to a client that does not read, the keepalive.
const (
	maxClientFrame = 64 << 10
	sendTimeout    = 30 * time.Second
	pingEvery      = 15 * time.Second
	// firstPing comes sooner: BoxLite's client gives up on an attach that
	// sends no frame within 10 s of the upgrade (its WS_FIRST_FRAME_TIMEOUT),
	// which a silent process would otherwise be.
	firstPing = 5 * time.Second
)

// allowedSignals are what POST /signal and an attach's signal frame may
// send (BoxLite's list); SIGKILL is DELETE's.
var allowedSignals = map[int]bool{
	int(syscall.SIGHUP): true, int(syscall.SIGINT): true, int(syscall.SIGQUIT): true, int(syscall.SIGABRT): true,
	int(syscall.SIGUSR1): true, int(syscall.SIGUSR2): true, int(syscall.SIGTERM): true, int(syscall.SIGWINCH): true,
}

func (a *API) startExec(w http.ResponseWriter, r *http.Request) error {
	var req wire.ExecRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	if req.Command == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "command is required")
	}
	cmd := boxlite.Command{Argv: append([]string{req.Command}, req.Args...), Env: req.Env, Cwd: req.WorkingDir, User: req.User, Stdin: true, Tty: req.TTY,
		Detachable: true} // it outlives a restart of this server (persist.go)
	if req.TimeoutSeconds != nil {
		d, err := req.TimeoutSeconds.Duration("timeout_seconds")
		if err != nil {
			return err
		}
		if d > maxExecTimeout {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "timeout_seconds: %v is more than %v", *req.TimeoutSeconds, maxExecTimeout.Seconds())
		}
		cmd.Timeout = d
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	e := &execution{id: newExecID(), boxID: b.ID(), key: caller(r), tty: req.TTY, started: time.Now(),
		command: commandSummary(cmd.Argv), exited: make(chan struct{}), kick: make(chan struct{}), stop: a.execs.stop}
	e.idle = e.started
	// The process outlives this request: its context is the server's.
	x, err := b.Exec(context.WithoutCancel(r.Context()), cmd)
	if err != nil {
		return err
	}
	e.x, e.agentID = x, x.ID()
	if err := a.execs.add(e); err != nil {
		x.Kill()
		x.Close()
		return err
	}
	e.start(a.execs.store)
	w.Header().Set("Location", "/v1/boxes/"+b.ID()+"/executions/"+e.id)
	writeJSON(w, http.StatusCreated, wire.ExecResponse{ExecutionID: e.id})
	return nil
}

func (a *API) execution(r *http.Request) (*execution, error) {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return nil, err
	}
	return a.execs.get(b.ID(), r.PathValue("exec_id"))
}

func (a *API) listExecs(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	out := []wire.ExecutionInfo{}
	for _, e := range a.execs.ofBox(b.ID()) {
		out = append(out, e.info())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getExec(w http.ResponseWriter, r *http.Request) error {
	e, err := a.execution(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e.info())
	return nil
}

func (a *API) killExec(w http.ResponseWriter, r *http.Request) error {
	e, err := a.execution(r)
	if err != nil {
		return err
	}
	if !e.isEnded() {
		e.kill()
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
		}
	}
	a.execs.evict(e)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) signalExec(w http.ResponseWriter, r *http.Request) error {
	var req wire.SignalRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	e, err := a.execution(r)
	if err != nil {
		return err
	}
	signal := e.signal
	if req.ProcessGroup {
		signal = e.signalGroup
	}
	if err := signal(req.Signal); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *execution) signal(sig int) error {
	if !allowedSignals[sig] {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "signal %d is not one of HUP, INT, QUIT, ABRT, USR1, USR2, TERM, WINCH (kill with DELETE)", sig)
	}
	if e.isEnded() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "execution %s has ended", e.id)
	}
	return e.x.Signal(syscall.Signal(sig))
}

// signalGroup is signal to the process's group (SignalRequest.ProcessGroup).
func (e *execution) signalGroup(sig int) error {
	if !allowedSignals[sig] || e.isEnded() {
		return e.signal(sig) // refused as signal refuses it
	}
	return e.x.SignalGroup(syscall.Signal(sig))
}

func (a *API) resizeExec(w http.ResponseWriter, r *http.Request) error {
	var req wire.ResizeRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	e, err := a.execution(r)
	if err != nil {
		return err
	}
	if err := e.resize(req.Rows, req.Cols); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *execution) resize(rows, cols int) error {
	if !e.tty {
		return errdefs.Errorf(errdefs.ErrInvalidState, "execution %s has no terminal (start it with tty: true)", e.id)
	}
	if rows < 1 || cols < 1 || rows > abi.MaxTerminalSize || cols > abi.MaxTerminalSize {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "terminal size %dx%d: want 1 to %d each", cols, rows, abi.MaxTerminalSize)
	}
	return e.x.Resize(rows, cols)
}

// control is a client's text frame on an attach.
type control struct {
	Type string `json:"type"`
	Cols int    `json:"cols,omitempty"`
	Rows int    `json:"rows,omitempty"`
	Sig  int    `json:"sig,omitempty"`
}

// attachExec streams an execution over a WebSocket (BoxLite's frames):
// binary [channel][bytes] out, binary stdin and JSON control in, an exit
// frame at the end. One client at a time; a client that leaves leaves the
// process running, and what it had not received is sent to the next one.
func (a *API) attachExec(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "stdin")
	if err != nil {
		return err
	}
	withStdin, err := boolParam(q, "stdin", true)
	if err != nil {
		return err
	}
	e, err := a.execution(r)
	if err != nil {
		return err
	}
	if e.x == nil && e.final != nil && e.final.Status == "lost" {
		return errdefs.Errorf(errdefs.ErrNotFound, "execution %s: %s", e.id, *e.final.ErrorMessage)
	}
	if err := e.claim(); err != nil {
		return err
	}
	defer e.release()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept answered the client
	}
	ws.SetReadLimit(maxClientFrame)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go e.readClient(ctx, cancel, ws, withStdin)
	go keepalive(ctx, cancel, ws)
	status, reason := e.sendOutput(ctx, ws)
	ws.Close(status, reason)
	return nil
}

// sendOutput sends the output until both streams end, then the exit
// frame; or until the client goes (its last chunk kept for the next). It
// reads a chunk from the box only when the client took the one before.
func (e *execution) sendOutput(ctx context.Context, ws *websocket.Conn) (websocket.StatusCode, string) {
	for i := range 2 {
		e.mu.Lock()
		p := e.pending[i]
		e.pending[i] = nil
		e.mu.Unlock()
		if p != nil && !e.send(ctx, ws, i, p) {
			return websocket.StatusGoingAway, "client gone"
		}
	}
	if e.x != nil {
		if status, reason, ended := e.sendStreams(ctx, ws, e.x); !ended {
			return status, reason
		}
	}
	select {
	case <-e.exited:
	case <-e.kick:
	case <-ctx.Done():
		return websocket.StatusGoingAway, "client gone"
	}
	select {
	case <-e.stop:
		// The server stops and its connections to the boxes end with it:
		// that is no exit; the process runs on for the next server.
		return websocket.StatusGoingAway, "server stopping"
	default:
	}
	return e.sendExit(ctx, ws)
}

// outputs is what sendStreams reads: a *boxlite.Execution's.
type outputs interface {
	ReadNonblock(fd int, p []byte) (int, error)
}

// sendStreams sends stdout and stderr as they come until both ended
// (ended), or returns how the attach ends: the client gone, the server
// stopping, the execution evicted (its exit sent).
func (e *execution) sendStreams(ctx context.Context, ws *websocket.Conn, out outputs) (status websocket.StatusCode, reason string, ended bool) {
	var done [2]bool
	buf := make([]byte, chunkSize)
	for {
		moved := false
		for i := range 2 {
			if done[i] {
				continue
			}
			n, err := out.ReadNonblock(i+1, buf)
			if n > 0 {
				moved = true
				if !e.send(ctx, ws, i, append([]byte(nil), buf[:n]...)) {
					return websocket.StatusGoingAway, "client gone", false
				}
			}
			if err != nil {
				done[i] = true
			}
		}
		// Checked before waiting: both streams may end in one pass (the
		// second's end woke us with nothing left to read), and no wake-up
		// comes after the last.
		if done[0] && done[1] {
			return 0, "", true
		}
		if moved {
			continue
		}
		select {
		case <-ctx.Done():
			return websocket.StatusGoingAway, "client gone", false
		case <-e.stop:
			return websocket.StatusGoingAway, "server stopping", false
		case <-e.kick:
			status, reason := e.sendExit(ctx, ws)
			return status, reason, false
		case <-e.notify:
		}
	}
}

// send sends one chunk of stream i; a failed send keeps it for the next
// client.
func (e *execution) send(ctx context.Context, ws *websocket.Conn, i int, p []byte) bool {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	frame := make([]byte, 1+len(p))
	frame[0] = byte(i + 1)
	copy(frame[1:], p)
	if err := ws.Write(sctx, websocket.MessageBinary, frame); err != nil {
		e.mu.Lock()
		e.pending[i] = p
		e.mu.Unlock()
		return false
	}
	return true
}

func (e *execution) sendExit(ctx context.Context, ws *websocket.Conn) (websocket.StatusCode, string) {
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
	}
	in := e.info()
	code := -1
	if in.ExitCode != nil {
		code = *in.ExitCode
	}
	msg, _ := json.Marshal(map[string]any{"type": "exit", "exit_code": code})
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	_ = ws.Write(sctx, websocket.MessageText, msg)
	return websocket.StatusNormalClosure, ""
}

// readClient applies the client's frames: stdin bytes, resize, signal,
// stdin_eof. A bad control frame answers an error frame; the attach goes on.
func (e *execution) readClient(ctx context.Context, cancel context.CancelFunc, ws *websocket.Conn, withStdin bool) {
	defer cancel()
	stdinOpen := withStdin
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if !withStdin {
				replyError(ctx, ws, "this attach was opened with stdin=false")
				continue
			}
			if stdinOpen && e.x.Stdin != nil {
				if _, err := e.x.Stdin.Write(data); err != nil {
					stdinOpen = false
				}
			}
			continue
		}
		var c control
		if err := json.Unmarshal(data, &c); err != nil {
			replyError(ctx, ws, "control frame is not JSON: "+err.Error())
			continue
		}
		switch c.Type {
		case "resize":
			err = e.resize(c.Rows, c.Cols)
		case "signal":
			err = e.signal(c.Sig)
		case "stdin_eof":
			if stdinOpen && e.x.Stdin != nil {
				err = e.x.Stdin.Close()
				stdinOpen = false
			}
		default:
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "unknown control frame type %q", truncate(c.Type))
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			replyError(ctx, ws, err.Error())
		}
	}
}

func replyError(ctx context.Context, ws *websocket.Conn, msg string) {
	data, _ := json.Marshal(map[string]string{"type": "error", "message": msg})
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	_ = ws.Write(sctx, websocket.MessageText, data)
}

// keepalive pings the client; one that does not answer in time is gone.
func keepalive(ctx context.Context, cancel context.CancelFunc, ws *websocket.Conn) {
	t := time.NewTimer(firstPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(pingEvery)
			pctx, pcancel := context.WithTimeout(ctx, 3*pingEvery)
			err := ws.Ping(pctx)
			pcancel()
			if err != nil {
				cancel()
				return
			}
		}
	}
}
