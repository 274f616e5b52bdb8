package k8sshim

import (
	"context"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// procState is a process's lifecycle: created (Create or Exec), running
// (Start), stopped (exited, or never started and deleted).
type procState int

const (
	procCreated procState = iota
	procRunning
	procStopped
)

// proc is a container's init process or one of its execs.
type proc struct {
	id                    string // the exec id; "" for the init process
	cmd                   boxlite.Command
	stdin, stdout, stderr string // FIFO paths from containerd; "" for none

	mu       sync.Mutex
	state    procState
	exec     *boxlite.Execution
	pid      uint32
	status   uint32
	exitedAt time.Time
	stdinF   *os.File
	done     chan struct{} // closed once stopped
}

func newProc(id string, cmd boxlite.Command, stdin, stdout, stderr string) *proc {
	cmd.Stdin = stdin != ""
	return &proc{id: id, cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr, done: make(chan struct{})}
}

// fifoOpenTimeout bounds opening containerd's FIFOs.
const fifoOpenTimeout = 10 * time.Second

// openFifo opens a FIFO of containerd's without blocking on its other end:
// read-write (the shim then never sees the client's EOF on stdin; CloseIO
// says when stdin ends).
func openFifo(ctx context.Context, path string) (*os.File, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "stdio %q: not an absolute clean path to a FIFO (the shim takes no log URIs)", path)
	}
	type res struct {
		f   *os.File
		err error
	}
	ch := make(chan res, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe == 0 {
				f.Close()
				err = errdefs.Errorf(errdefs.ErrInvalidArgument, "stdio %s is not a FIFO", path)
			}
		}
		ch <- res{f, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, fifoOpenTimeout)
	defer cancel()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.f != nil {
				r.f.Close()
			}
		}()
		return nil, errdefs.Errorf(errdefs.ErrTimeout, "open stdio %s: %v", path, ctx.Err())
	}
}

// start runs the process in box and returns its pid. onExit is called once
// it has exited and its output reached containerd's FIFOs.
func (p *proc) start(ctx context.Context, box *boxlite.Box, onExit func(*proc)) (uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != procCreated {
		return 0, errdefs.Errorf(errdefs.ErrInvalidState, "start: process %q was already started", p.id)
	}
	var files []*os.File
	fail := func(err error) (uint32, error) {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
		return 0, err
	}
	open := func(path string) (*os.File, error) {
		if path == "" {
			return nil, nil
		}
		f, err := openFifo(ctx, path)
		files = append(files, f)
		return f, err
	}
	out, err := open(p.stdout)
	if err != nil {
		return fail(err)
	}
	errF, err := open(p.stderr)
	if err != nil {
		return fail(err)
	}
	in, err := open(p.stdin)
	if err != nil {
		return fail(err)
	}
	e, err := box.Exec(ctx, p.cmd)
	if err != nil {
		return fail(err)
	}
	p.exec, p.state, p.stdinF = e, procRunning, in
	// The pid arrives with the agent's Started frame.
	for deadline := time.Now().Add(2 * time.Second); e.Pid() == 0 && time.Now().Before(deadline); {
		select {
		case <-e.Done():
			deadline = time.Time{}
		case <-time.After(5 * time.Millisecond):
		}
	}
	p.pid = uint32(max(e.Pid(), 0))
	var copies sync.WaitGroup
	pump := func(dst *os.File, src io.Reader) {
		defer copies.Done()
		if dst == nil {
			_, _ = io.Copy(io.Discard, src)
			return
		}
		_, _ = io.Copy(dst, src)
	}
	copies.Add(2)
	go pump(out, e.Stdout)
	go pump(errF, e.Stderr)
	if in != nil && e.Stdin != nil {
		go func() {
			_, _ = io.Copy(e.Stdin, in)
		}()
	}
	go func() {
		st, werr := e.Wait(context.Background())
		drained := make(chan struct{})
		go func() { copies.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			log.Printf("process %q: output still flowing 5 s after its exit; closing its stdio", p.id)
		}
		code := st.Code
		if werr != nil && !errors.Is(werr, errdefs.ErrTimeout) {
			log.Printf("process %q: %v", p.id, werr)
			if code < 0 {
				code = 255
			}
		}
		p.mu.Lock()
		p.state, p.status, p.exitedAt = procStopped, uint32(code), time.Now()
		for _, f := range []*os.File{out, errF, p.stdinF} {
			if f != nil {
				f.Close()
			}
		}
		p.stdinF = nil
		p.mu.Unlock()
		// Wait answers after onExit has queued the exit's events: the CRI
		// plugin marks a container exited from Wait, and a TaskOOM (which
		// onExit asks the box for) queued later could reach it after a
		// client read the reason.
		onExit(p)
		close(p.done)
	}()
	return p.pid, nil
}

// signal sends sig to the process (its process group when all is set).
func (p *proc) signal(sig syscall.Signal, all bool) error {
	p.mu.Lock()
	state, e := p.state, p.exec
	p.mu.Unlock()
	switch state {
	case procCreated:
		if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
			p.stopUnstarted()
			return nil
		}
		return errdefs.Errorf(errdefs.ErrInvalidState, "kill: process %q is not running", p.id)
	case procStopped:
		return errdefs.Errorf(errdefs.ErrNotFound, "kill: process %q has already finished", p.id)
	}
	if all {
		return e.SignalGroup(sig)
	}
	return e.Signal(sig)
}

// stopUnstarted marks a process that never started as stopped (status 137,
// as a process killed before it ran).
func (p *proc) stopUnstarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != procCreated {
		return
	}
	p.state, p.status, p.exitedAt = procStopped, 128+uint32(syscall.SIGKILL), time.Now()
	close(p.done)
}

// closeStdin ends the process's stdin (CloseIO).
func (p *proc) closeStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exec == nil || p.exec.Stdin == nil {
		return nil
	}
	if p.stdinF != nil {
		p.stdinF.Close()
		p.stdinF = nil
	}
	return p.exec.Stdin.Close()
}

func (p *proc) resize(rows, cols int) error {
	p.mu.Lock()
	e := p.exec
	p.mu.Unlock()
	if e == nil || !e.Tty() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "resize: process %q has no terminal", p.id)
	}
	err := e.Resize(rows, cols)
	select {
	case <-e.Done():
		// The process has exited and its terminal with it: nothing to
		// resize. A quick process may end before its client's first
		// resize (ctr exec -t sends it after Start), which is no error.
		if errdefs.KindOf(err) == errdefs.KindInvalidState {
			return nil
		}
	default:
	}
	return err
}

// snapshot is the process's state for State, Wait and Delete.
func (p *proc) snapshot() (state procState, pid, status uint32, exitedAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.pid, p.status, p.exitedAt
}

// abandon kills a running process (the container goes).
func (p *proc) abandon() {
	p.mu.Lock()
	e := p.exec
	p.mu.Unlock()
	if e != nil {
		_ = e.Close()
	}
	p.stopUnstarted()
}
