package k8sshim

import (
	"context"
	"errors"
	"log"
	"os"
	"sync"
	"syscall"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/containerd/api/types/task"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// Options configure the task service.
type Options struct {
	Namespace    string // containerd namespace of the tasks
	TTRPCAddress string // containerd's ttrpc socket, for events ("" : none)
	Image        string // the image boxes boot (their own root; containers have theirs)
	// Exit is called once Shutdown found no task left: the daemon then
	// calls Close and ends.
	Exit func()
}

// service implements containerd's task API (containerd.task.v2.Task).
type service struct {
	opts   Options
	events *publisher

	rtOnce sync.Once
	rt     *boxlite.Runtime
	rtErr  error

	createMu sync.Mutex // one Create at a time: it may boot a box
	mu       sync.Mutex
	pods     map[string]*pod
	conts    map[string]*container
}

var _ taskapi.TTRPCTaskService = (*service)(nil)

// Service is containerd's task API, served by the shim daemon.
type Service interface {
	taskapi.TTRPCTaskService
	Close()
}

// NewService returns the task service.
func NewService(opts Options) Service {
	return &service{opts: opts, events: newPublisher(opts.TTRPCAddress, opts.Namespace),
		pods: map[string]*pod{}, conts: map[string]*container{}}
}

// rpcError converts an error to the status containerd maps back to its
// own error kinds (errdefs.FromGRPC).
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	for kind, c := range map[error]codes.Code{
		errdefs.ErrNotFound: codes.NotFound, errdefs.ErrAlreadyExists: codes.AlreadyExists,
		errdefs.ErrInvalidArgument: codes.InvalidArgument, errdefs.ErrInvalidState: codes.FailedPrecondition,
		errdefs.ErrTimeout: codes.DeadlineExceeded, errdefs.ErrUnsupported: codes.Unimplemented,
		errdefs.ErrLimit: codes.ResourceExhausted, errdefs.ErrClosed: codes.Unavailable,
	} {
		if errors.Is(err, kind) {
			code = c
			break
		}
	}
	return status.Error(code, err.Error())
}

// lookup finds a container and one of its processes (execID "" : init).
func (s *service) lookup(id, execID string) (*container, *proc, error) {
	if err := checkID("container", id); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conts[id]
	if c == nil {
		return nil, nil, errdefs.Errorf(errdefs.ErrNotFound, "container %s: not found", id)
	}
	if execID == "" {
		return c, c.init, nil
	}
	p := c.execs[execID]
	if p == nil {
		return nil, nil, errdefs.Errorf(errdefs.ErrNotFound, "container %s: exec %q: not found", id, execID)
	}
	return c, p, nil
}

func (s *service) Create(ctx context.Context, r *taskapi.CreateTaskRequest) (_ *taskapi.CreateTaskResponse, err error) {
	defer func() { err = rpcError(err) }()
	if err := checkID("container", r.ID); err != nil {
		return nil, err
	}
	if err := checkBundle(r.Bundle); err != nil {
		return nil, err
	}
	if r.Checkpoint != "" || r.ParentCheckpoint != "" {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "create %s: checkpoints", r.ID)
	}
	sp, err := readSpec(r.Bundle)
	if err != nil {
		return nil, err
	}
	sandbox, err := sp.sandboxOf(r.ID)
	if err != nil {
		return nil, err
	}
	var limits boxlite.RootLimits
	if sp.Linux != nil {
		if limits, err = sp.Linux.Resources.limits(); err != nil {
			return nil, err
		}
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	s.mu.Lock()
	_, taken := s.conts[r.ID]
	p := s.pods[sandbox]
	s.mu.Unlock()
	if taken {
		return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "container %s: already exists", r.ID)
	}
	if sandbox != r.ID && p == nil {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "container %s: its pod sandbox %s is not in this shim", r.ID, sandbox)
	}
	c := &container{id: r.ID, bundle: r.Bundle, execs: map[string]*proc{}, memLimit: sp.memoryLimit()}
	if c.rootfs, c.mounted, err = prepareRootfs(r.Bundle, sp, r.Rootfs); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && c.mounted {
			if uerr := unmountAll(c.rootfs); uerr != nil {
				log.Printf("container %s: %v", c.id, uerr)
			}
		}
	}()
	newBox := p == nil
	if newBox {
		if p, err = newPod(r.ID, r.Bundle); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				p.removeShare()
			}
		}()
	}
	if newBox {
		// The box first: its file daemon gets a copy of the empty shared
		// directory, and what place mounts there from now on reaches it
		// by propagation (mounts made before would not: the copy is not
		// recursive).
		if err := s.startBox(ctx, p, sp); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				s.removeBox(p.box)
			}
		}()
	}
	if err := c.place(p, sp); err != nil {
		return nil, err
	}
	c.pod = p
	if err := s.applyLimits(ctx, c, limits, false); err != nil {
		s.stopOOMWatch(c)
		if !newBox {
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			if rerr := p.box.ReleaseRoot(rctx, c.boxRoot); rerr != nil {
				log.Printf("container %s: %v", c.id, rerr)
			}
			cancel()
		}
		c.unplace()
		return nil, err
	}
	pr := sp.Process
	cmd := c.command(pr, r.Terminal)
	c.init = newProc("", cmd, r.Stdin, r.Stdout, r.Stderr)
	s.mu.Lock()
	p.members[c.id] = true
	s.pods[p.id] = p
	s.conts[c.id] = c
	s.mu.Unlock()
	s.events.publish(topicCreate, &eventstypes.TaskCreate{ContainerID: c.id, Bundle: c.bundle,
		IO: &eventstypes.TaskIO{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: cmd.Tty}})
	return &taskapi.CreateTaskResponse{}, nil
}

func (s *service) Start(ctx context.Context, r *taskapi.StartRequest) (_ *taskapi.StartResponse, err error) {
	defer func() { err = rpcError(err) }()
	c, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	if r.ExecID != "" {
		if st, _, _, _ := c.init.snapshot(); st != procRunning {
			return nil, errdefs.Errorf(errdefs.ErrInvalidState, "exec %s in %s: the container is not running", r.ExecID, c.id)
		}
	}
	pid, err := p.start(ctx, c.pod.box, func(p *proc) { s.exited(c, p) })
	if err != nil {
		return nil, err
	}
	if r.ExecID == "" {
		s.events.publish(topicStart, &eventstypes.TaskStart{ContainerID: c.id, Pid: pid})
	} else {
		s.events.publish(topicExecStarted, &eventstypes.TaskExecStarted{ContainerID: c.id, ExecID: r.ExecID, Pid: pid})
	}
	return &taskapi.StartResponse{Pid: pid}, nil
}

// command is how a process of c runs in the box: in c's root, with its
// volumes bound in.
func (c *container) command(pr *process, terminal bool) boxlite.Command {
	cmd := boxlite.Command{Argv: pr.Args, Env: pr.env(), Cwd: pr.Cwd, User: pr.user(), Tty: terminal || pr.Terminal,
		Root: c.boxRoot, RootBinds: c.rootBinds, Groups: pr.User.AdditionalGids, Rlimits: pr.rlimits()}
	if cmd.Tty && pr.ConsoleSize != nil {
		cmd.Rows, cmd.Cols = int(pr.ConsoleSize.Height), int(pr.ConsoleSize.Width)
	}
	return cmd
}

// execsOf lists c's execs.
func (s *service) execsOf(c *container) []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*proc, 0, len(c.execs))
	for _, e := range c.execs {
		out = append(out, e)
	}
	return out
}

// exited publishes a process's exit; the end of a container's init ends
// its execs, as a container's PID 1 would.
func (s *service) exited(c *container, p *proc) {
	_, pid, code, at := p.snapshot()
	id := p.id
	if id == "" {
		id = c.id
		s.checkOOM(c)
		for _, e := range s.execsOf(c) {
			e.abandon()
		}
	}
	s.events.publish(topicExit, &eventstypes.TaskExit{ContainerID: c.id, ID: id, Pid: pid, ExitStatus: code, ExitedAt: timestamppb.New(at)})
}

func (s *service) Delete(ctx context.Context, r *taskapi.DeleteRequest) (_ *taskapi.DeleteResponse, err error) {
	defer func() { err = rpcError(err) }()
	c, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	st, pid, code, at := p.snapshot()
	if st == procRunning {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "delete %s %q: the process is running", r.ID, r.ExecID)
	}
	if st == procCreated {
		p.stopUnstarted()
		_, pid, code, at = p.snapshot()
	}
	resp := &taskapi.DeleteResponse{Pid: pid, ExitStatus: code, ExitedAt: timestamppb.New(at)}
	if r.ExecID != "" {
		s.mu.Lock()
		delete(c.execs, r.ExecID)
		s.mu.Unlock()
		return resp, nil
	}
	s.mu.Lock()
	delete(s.conts, c.id)
	pd := c.pod
	delete(pd.members, c.id)
	last := len(pd.members) == 0
	if last {
		delete(s.pods, pd.id)
	}
	s.mu.Unlock()
	s.stopOOMWatch(c)
	if !last {
		// The pod runs on: its agent lets go of the container's root.
		rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
		if err := pd.box.ReleaseRoot(rctx, c.boxRoot); err != nil {
			log.Printf("container %s: %v", c.id, err)
		}
		cancel()
	}
	c.unplace()
	if last {
		s.removeBox(pd.box)
		pd.removeShare()
	}
	if c.mounted {
		if err := unmountAll(c.rootfs); err != nil {
			log.Printf("container %s: %v", c.id, err)
		}
	}
	s.events.publish(topicDelete, &eventstypes.TaskDelete{ContainerID: c.id, Pid: pid, ExitStatus: code, ExitedAt: resp.ExitedAt})
	return resp, nil
}

func (s *service) Exec(ctx context.Context, r *taskapi.ExecProcessRequest) (_ *emptypb.Empty, err error) {
	defer func() { err = rpcError(err) }()
	if err := checkID("exec", r.ExecID); err != nil {
		return nil, err
	}
	c, _, err := s.lookup(r.ID, "")
	if err != nil {
		return nil, err
	}
	if r.Spec == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec %s in %s: no process spec", r.ExecID, r.ID)
	}
	pr, err := parseProcess(r.Spec.GetValue())
	if err != nil {
		return nil, err
	}
	cmd := c.command(pr, r.Terminal)
	s.mu.Lock()
	if _, ok := c.execs[r.ExecID]; ok {
		s.mu.Unlock()
		return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "exec %s in %s: already exists", r.ExecID, r.ID)
	}
	c.execs[r.ExecID] = newProc(r.ExecID, cmd, r.Stdin, r.Stdout, r.Stderr)
	s.mu.Unlock()
	s.events.publish(topicExecAdded, &eventstypes.TaskExecAdded{ContainerID: c.id, ExecID: r.ExecID})
	return &emptypb.Empty{}, nil
}

func (s *service) State(ctx context.Context, r *taskapi.StateRequest) (_ *taskapi.StateResponse, err error) {
	defer func() { err = rpcError(err) }()
	c, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	st, pid, code, at := p.snapshot()
	resp := &taskapi.StateResponse{ID: c.id, ExecID: r.ExecID, Bundle: c.bundle, Pid: pid,
		Stdin: p.stdin, Stdout: p.stdout, Stderr: p.stderr, Terminal: p.cmd.Tty}
	switch st {
	case procCreated:
		resp.Status = task.Status_CREATED
	case procRunning:
		resp.Status = task.Status_RUNNING
	default:
		resp.Status, resp.ExitStatus, resp.ExitedAt = task.Status_STOPPED, code, timestamppb.New(at)
	}
	return resp, nil
}

func (s *service) Wait(ctx context.Context, r *taskapi.WaitRequest) (_ *taskapi.WaitResponse, err error) {
	defer func() { err = rpcError(err) }()
	_, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done(): // the caller's deadline (containerd's request)
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "wait %s %q: %v", r.ID, r.ExecID, ctx.Err())
	}
	_, _, code, at := p.snapshot()
	return &taskapi.WaitResponse{ExitStatus: code, ExitedAt: timestamppb.New(at)}, nil
}

func (s *service) Kill(ctx context.Context, r *taskapi.KillRequest) (_ *emptypb.Empty, err error) {
	defer func() { err = rpcError(err) }()
	if r.Signal == 0 || r.Signal > 64 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "kill %s: signal %d", r.ID, r.Signal)
	}
	c, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	sig := syscall.Signal(r.Signal)
	before, _, _, _ := p.snapshot()
	if err := p.signal(sig, r.All); err != nil {
		return nil, err
	}
	if after, _, _, _ := p.snapshot(); before == procCreated && after == procStopped {
		s.exited(c, p) // killed before it started: containerd waits for its exit too
	}
	if r.All && r.ExecID == "" {
		for _, e := range s.execsOf(c) {
			_ = e.signal(sig, true) // an exec that already ended is fine
		}
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Pids(ctx context.Context, r *taskapi.PidsRequest) (_ *taskapi.PidsResponse, err error) {
	defer func() { err = rpcError(err) }()
	c, p, err := s.lookup(r.ID, "")
	if err != nil {
		return nil, err
	}
	var out []*task.ProcessInfo
	for _, q := range append([]*proc{p}, s.execsOf(c)...) {
		if st, pid, _, _ := q.snapshot(); st == procRunning && pid != 0 {
			out = append(out, &task.ProcessInfo{Pid: pid})
		}
	}
	return &taskapi.PidsResponse{Processes: out}, nil
}

func (s *service) ResizePty(ctx context.Context, r *taskapi.ResizePtyRequest) (_ *emptypb.Empty, err error) {
	defer func() { err = rpcError(err) }()
	_, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	if err := p.resize(int(r.Height), int(r.Width)); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) CloseIO(ctx context.Context, r *taskapi.CloseIORequest) (_ *emptypb.Empty, err error) {
	defer func() { err = rpcError(err) }()
	_, p, err := s.lookup(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	if r.Stdin {
		if err := p.closeStdin(); err != nil {
			return nil, err
		}
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Connect(ctx context.Context, r *taskapi.ConnectRequest) (_ *taskapi.ConnectResponse, err error) {
	defer func() { err = rpcError(err) }()
	resp := &taskapi.ConnectResponse{ShimPid: uint32(os.Getpid())}
	if _, p, err := s.lookup(r.ID, ""); err == nil {
		_, resp.TaskPid, _, _ = p.snapshot()
	}
	return resp, nil
}

// exitDelay lets Shutdown's answer reach containerd before the daemon ends.
const exitDelay = 50 * time.Millisecond

func (s *service) Shutdown(ctx context.Context, r *taskapi.ShutdownRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	n := len(s.conts)
	s.mu.Unlock()
	if n > 0 {
		return &emptypb.Empty{}, nil // other tasks of the pod still run here
	}
	if s.opts.Exit != nil {
		time.AfterFunc(exitDelay, s.opts.Exit)
	}
	return &emptypb.Empty{}, nil
}

func unimplemented(what string) error {
	return status.Errorf(codes.Unimplemented, "%s: not implemented by the boxlite shim", what)
}

func (s *service) Pause(context.Context, *taskapi.PauseRequest) (*emptypb.Empty, error) {
	return nil, unimplemented("pause")
}

func (s *service) Resume(context.Context, *taskapi.ResumeRequest) (*emptypb.Empty, error) {
	return nil, unimplemented("resume")
}

func (s *service) Checkpoint(context.Context, *taskapi.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return nil, unimplemented("checkpoint")
}

// Close ends every box (the daemon ends): their containers are gone.
func (s *service) Close() {
	s.mu.Lock()
	conts := make([]*container, 0, len(s.conts))
	for _, c := range s.conts {
		conts = append(conts, c)
	}
	s.mu.Unlock()
	pods := map[*pod]bool{}
	for _, c := range conts {
		c.init.abandon()
		c.unplace()
		pods[c.pod] = true
	}
	if s.rt != nil {
		if err := s.rt.Close(); err != nil { // stops the boxes
			log.Printf("close: %v", err)
		}
	}
	for p := range pods {
		p.removeShare()
	}
	for _, c := range conts {
		if c.mounted {
			if err := unmountAll(c.rootfs); err != nil {
				log.Printf("container %s: %v", c.id, err)
			}
		}
	}
}
