package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	pb "github.com/boxlite/boxlite/internal/e2b/envd/process"
	"github.com/boxlite/boxlite/internal/e2b/envd/process/processconnect"
)

// Bounds of a process request.
const (
	maxArgs      = 4096
	maxArgvBytes = 1 << 20
	outChunk     = 32 << 10 // one data event at most
	subQueue     = 8        // events queued for one client
)

// proc is a process started by Start, until it ends.
type proc struct {
	pid uint32
	tag string
	cfg *pb.ProcessConfig
	pty bool
	x   *boxlite.Execution

	stdinMu sync.Mutex // orders input
	mu      sync.Mutex
	subs    map[*sub]struct{}
	ended   chan struct{}
	end     *pb.ProcessEvent_EndEvent
}

// sub is one client's stream of a process's events.
type sub struct {
	ch   chan *pb.ProcessEvent
	gone chan struct{}
}

func (p *proc) subscribe() *sub {
	s := &sub{ch: make(chan *pb.ProcessEvent, subQueue), gone: make(chan struct{})}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	return s
}

func (p *proc) unsubscribe(s *sub) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

// broadcast gives ev to every client, waiting for each to take it: a slow
// client holds the process back (its output then waits in the box), never
// this server's memory. With no client the output is dropped, as envd's.
func (p *proc) broadcast(ev *pb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*sub, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// pump reads the output until both streams end, then the exit.
func (p *proc) pump(sb *sandbox) {
	var wg sync.WaitGroup
	read := func(r io.Reader, data func([]byte) *pb.ProcessEvent_DataEvent) {
		defer wg.Done()
		buf := make([]byte, outChunk)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				p.broadcast(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data(append([]byte(nil), buf[:n]...))}})
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	if p.pty {
		go read(p.x.Stdout, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Pty{Pty: b}}
		})
	} else {
		go read(p.x.Stdout, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
		})
	}
	go read(p.x.Stderr, func(b []byte) *pb.ProcessEvent_DataEvent {
		return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}}
	})
	wg.Wait()
	st, err := p.x.Wait(context.Background())
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(st.Code), Exited: st.Signal == 0 && err == nil, Status: fmt.Sprintf("exit status %d", st.Code)}
	if st.Signal != 0 {
		end.ExitCode = -1
		end.Status = "signal: " + strings.TrimPrefix(syscall.Signal(st.Signal).String(), "signal ")
	}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
		if !st.TimedOut && st.Code == -1 {
			end.Status = "error"
		}
	}
	p.x.Close()
	sb.mu.Lock()
	if sb.procs[p.pid] == p {
		delete(sb.procs, p.pid)
	}
	sb.mu.Unlock()
	p.mu.Lock()
	p.end = end
	p.mu.Unlock()
	close(p.ended)
	p.broadcast(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
}

var userPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.-]{0,31}$|^[0-9]{1,10}$`)

// userOf is the user an envd request runs as: E2B's "Authorization: Basic
// base64(user:)"; "" is the box's default.
func userOf(h http.Header) (string, error) {
	a := h.Get("Authorization")
	if a == "" {
		return "", nil
	}
	scheme, val, _ := strings.Cut(a, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return "", statusErr(http.StatusBadRequest, "Authorization: want Basic base64(user:)")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
	if err != nil {
		return "", statusErr(http.StatusBadRequest, "Authorization: not base64")
	}
	user, _, _ := strings.Cut(string(raw), ":")
	if user == "" {
		return "", nil
	}
	if !userPattern.MatchString(user) {
		return "", statusErr(http.StatusBadRequest, "user %q: not a user name", truncate(user))
	}
	return user, nil
}

type processService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

// shell is argv with E2B's /bin/bash run by /bin/sh in a box without bash
// (the busybox-based stand-in of E2B's base template).
func (sb *sandbox) shell(ctx context.Context, argv []string) []string {
	if argv[0] != "/bin/bash" && argv[0] != "bash" {
		return argv
	}
	sb.mu.Lock()
	has := sb.hasBash
	sb.mu.Unlock()
	if has == 0 {
		res, err := sb.box.Run(ctx, boxlite.Command{Argv: []string{"/bin/sh", "-c", "command -v bash >/dev/null"}, Timeout: 30 * time.Second})
		if err == nil {
			has = -1
			if res.Code == 0 {
				has = 1
			}
			sb.mu.Lock()
			sb.hasBash = has
			sb.mu.Unlock()
		}
	}
	if has == -1 {
		return append([]string{"/bin/sh"}, argv[1:]...)
	}
	return argv
}

func checkConfig(cfg *pb.ProcessConfig) error {
	if cfg == nil || cfg.Cmd == "" {
		return statusErr(http.StatusBadRequest, "process.cmd is required")
	}
	if len(cfg.Args) > maxArgs || len(cfg.Envs) > maxArgs {
		return statusErr(http.StatusBadRequest, "at most %d args and envs", maxArgs)
	}
	n := len(cfg.Cmd) + len(cfg.GetCwd())
	for _, a := range append([]string{cfg.Cmd, cfg.GetCwd()}, cfg.Args...) {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return statusErr(http.StatusBadRequest, "a NUL byte in the command")
		}
	}
	for k, v := range cfg.Envs {
		n += len(k) + len(v)
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return statusErr(http.StatusBadRequest, "env %q: want a variable name and a value without NUL", truncate(k))
		}
	}
	if n > maxArgvBytes {
		return statusErr(http.StatusBadRequest, "the command is over %d bytes", maxArgvBytes)
	}
	return nil
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	sb := sandboxOf(ctx)
	user, err := userOf(req.Header())
	if err != nil {
		return connectErr(err)
	}
	cfg := req.Msg.GetProcess()
	if err := checkConfig(cfg); err != nil {
		return connectErr(err)
	}
	if len(req.Msg.GetTag()) > 256 {
		return connectErr(statusErr(http.StatusBadRequest, "tag over 256 bytes"))
	}
	env := cfg.Envs
	if rec, ok := ps.s.store.get(sb.box.ID()); ok && len(rec.EnvVars) > 0 {
		// The sandbox's envVars (the box has those it was made with; one
		// made from a snapshot has the source's, and these add to them).
		env = maps.Clone(rec.EnvVars)
		maps.Copy(env, cfg.Envs)
	}
	cmd := boxlite.Command{Argv: sb.shell(ctx, append([]string{cfg.Cmd}, cfg.Args...)), Env: env, Cwd: cfg.GetCwd(), User: user,
		Stdin: req.Msg.GetStdin()}
	if pty := req.Msg.Pty; pty != nil {
		cmd.Tty, cmd.Stdin = true, true
		if sz := pty.GetSize(); sz != nil {
			if sz.Rows < 1 || sz.Cols < 1 || sz.Rows > 65535 || sz.Cols > 65535 {
				return connectErr(statusErr(http.StatusBadRequest, "pty size %dx%d: want 1 to 65535 each", sz.Cols, sz.Rows))
			}
			cmd.Rows, cmd.Cols = int(sz.Rows), int(sz.Cols)
		}
	}
	sb.mu.Lock()
	n, closed := len(sb.procs), sb.closed
	sb.mu.Unlock()
	if closed {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s is going away", sb.box.ID()))
	}
	if n >= ps.s.lim.ProcsPerSandbox {
		return connectErr(statusErr(http.StatusTooManyRequests, "sandbox %s runs %d processes, its limit", sb.box.ID(), n))
	}
	// The process outlives this request: it ends with the box or a signal.
	// It is detachable: a pause, fork or snapshot keeps it running in the
	// box's memory, and the sandbox that runs it next adopts it (adopt.go).
	cmd.Detachable = true
	x, err := sb.box.Exec(context.WithoutCancel(ctx), cmd)
	if errors.Is(err, errdefs.ErrUnsupported) { // an agent without detachable executions
		cmd.Detachable = false
		x, err = sb.box.Exec(context.WithoutCancel(ctx), cmd)
	}
	if err != nil {
		return connectErr(err)
	}
	pid, err := waitPid(ctx, x)
	if err != nil {
		x.Close()
		return connectErr(err)
	}
	p := &proc{pid: pid, tag: req.Msg.GetTag(), cfg: cfg, pty: cmd.Tty, x: x, subs: map[*sub]struct{}{}, ended: make(chan struct{})}
	sb.mu.Lock()
	sb.procs[pid] = p
	sb.mu.Unlock()
	s := p.subscribe()
	defer p.unsubscribe(s)
	go p.pump(sb)
	return follow(ctx, req.Header(), p, s, func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) })
}

// endedPids names processes that ended before the box could tell their pid
// (a quick one: the agent reports pid 0 when the process was gone before
// it read it). They are above any pid Linux gives (pid_max is at most
// 2^22), so they never name a live process.
var endedPids atomic.Uint32

// waitPid waits for the process's pid in the box.
func waitPid(ctx context.Context, x *boxlite.Execution) (uint32, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for d := time.Millisecond; ; d = min(2*d, 20*time.Millisecond) {
		if pid := x.Pid(); pid > 0 {
			return uint32(pid), nil
		}
		select {
		case <-x.Done():
			if pid := x.Pid(); pid > 0 {
				return uint32(pid), nil
			}
			if _, err := x.Wait(ctx); err != nil {
				return 0, err
			}
			// It ran and ended: its output and exit are in x.
			return 1<<22 + endedPids.Add(1)%(1<<30), nil
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(d):
		}
		if time.Now().After(deadline) {
			return 0, errdefs.Errorf(errdefs.ErrTimeout, "the box did not start the process in time")
		}
	}
}

// follow sends the start event, then the process's events to one client
// until the end, with keepalives at the client's interval.
func follow(ctx context.Context, h http.Header, p *proc, s *sub, send func(*pb.ProcessEvent) error) error {
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
		return err
	}
	every := 50 * time.Second
	if v, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && v > 0 {
		every = min(max(time.Duration(v)*time.Second, time.Second), 5*time.Minute)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case ev := <-s.ch:
			if err := send(ev); err != nil {
				return err
			}
			if _, ok := ev.Event.(*pb.ProcessEvent_End); ok {
				return nil
			}
		case <-t.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return connectErr(ctx.Err())
		}
	}
}

// find is the running process a selector names.
func (sb *sandbox) find(sel *pb.ProcessSelector) (*proc, error) {
	if sel == nil || sel.Selector == nil {
		return nil, connectErr(statusErr(http.StatusBadRequest, "process: a pid or a tag is required"))
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch v := sel.Selector.(type) {
	case *pb.ProcessSelector_Pid:
		if p := sb.procs[v.Pid]; p != nil {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", v.Pid))
	case *pb.ProcessSelector_Tag:
		for _, p := range sb.procs {
			if p.tag != "" && p.tag == v.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", truncate(v.Tag)))
	}
	return nil, connectErr(statusErr(http.StatusBadRequest, "process: unknown selector"))
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, err := sandboxOf(ctx).find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	s := p.subscribe()
	defer p.unsubscribe(s)
	select {
	case <-p.ended:
		// Ended between find and subscribe: the end is all there is.
		p.mu.Lock()
		end := p.end
		p.mu.Unlock()
		go func() { s.ch <- &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}} }()
	default:
	}
	return follow(ctx, req.Header(), p, s, func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) })
}

func (ps *processService) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	sb := sandboxOf(ctx)
	sb.mu.Lock()
	out := &pb.ListResponse{}
	for _, p := range sb.procs {
		in := &pb.ProcessInfo{Config: p.cfg, Pid: p.pid}
		if p.tag != "" {
			t := p.tag
			in.Tag = &t
		}
		out.Processes = append(out.Processes, in)
	}
	sb.mu.Unlock()
	return connect.NewResponse(out), nil
}

// input writes to the process's stdin (its terminal with a pty).
func (p *proc) input(in *pb.ProcessInput) error {
	if in == nil {
		return connectErr(statusErr(http.StatusBadRequest, "input is required"))
	}
	var data []byte
	switch v := in.Input.(type) {
	case *pb.ProcessInput_Stdin:
		data = v.Stdin
	case *pb.ProcessInput_Pty:
		data = v.Pty
	default:
		return connectErr(statusErr(http.StatusBadRequest, "input: stdin or pty is required"))
	}
	if p.x.Stdin == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin", p.pid))
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if _, err := p.x.Stdin.Write(data); err != nil {
		return connectErr(err)
	}
	return nil
}

func (ps *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	p, err := sandboxOf(ctx).find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.input(req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (ps *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	sb := sandboxOf(ctx)
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *pb.StreamInputRequest_Start:
			if p != nil {
				return nil, connectErr(statusErr(http.StatusBadRequest, "a second start event"))
			}
			var err error
			if p, err = sb.find(ev.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *pb.StreamInputRequest_Data:
			if p == nil {
				return nil, connectErr(statusErr(http.StatusBadRequest, "data before the start event"))
			}
			if err := p.input(ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *pb.StreamInputRequest_Keepalive:
		default:
			return nil, connectErr(statusErr(http.StatusBadRequest, "an empty event"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	p, err := sandboxOf(ctx).find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connectErr(statusErr(http.StatusBadRequest, "signal %d: want SIGTERM or SIGKILL", req.Msg.GetSignal()))
	}
	err = p.x.SignalGroup(sig)
	if errors.Is(err, errdefs.ErrUnsupported) {
		err = p.x.Signal(sig)
	}
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (ps *processService) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	p, err := sandboxOf(ctx).find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if sz := req.Msg.GetPty().GetSize(); sz != nil {
		if !p.pty {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no pty", p.pid))
		}
		if err := p.x.Resize(int(min(sz.Rows, 1<<20)), int(min(sz.Cols, 1<<20))); err != nil {
			return nil, connectErr(err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	p, err := sandboxOf(ctx).find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.pty {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs on a pty: send Ctrl+D (0x04) instead", p.pid))
	}
	if p.x.Stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin", p.pid))
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if err := p.x.Stdin.Close(); err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}
