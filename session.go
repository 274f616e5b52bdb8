package boxlite

import (
	"context"
	"errors"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/session"
)

// Persistent sessions (DESIGN.md, decision 9) are implemented by package
// internal/session over a box's executions; these are its types under the
// names this package has always given them.
type (
	// SessionOptions configures a session (Box.NewPythonSession, Box.NewShellSession).
	SessionOptions = session.Options
	// Session is a persistent Python interpreter in a box: each Run is a
	// cell that sees the globals, imports and definitions of the cells
	// before it.
	Session = session.Python
	// Cell is a running cell (Session.RunStream).
	Cell = session.Cell
	// CellResult is what a cell did.
	CellResult = session.CellResult
	// CellError is an exception a cell raised.
	CellError = session.CellError
	// Chunk is output a running cell wrote.
	Chunk = session.Chunk
)

// ErrSessionRestarted is wrapped, with ErrTimeout, by the error of a cell or
// command that did not stop when interrupted: its interpreter or shell was
// killed and started again, and the session's state is gone.
var ErrSessionRestarted = session.ErrRestarted

// NewPythonSession starts a Python interpreter in the box, ready for cells.
// It fails with ErrNotFound when the image has no Python 3.
func (b *Box) NewPythonSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	return session.NewPython(ctx, b.sessionStarter(), b.sessionDefaults(opts), b.holdAwake)
}

// ShellSession is a live shell in a box: the working directory, exported
// and shell variables and functions set by one Exec are there for the next.
// Commands run one at a time; a ShellSession is safe for concurrent use.
// Interrupt, Reset, Close, Pid and Restarts are session.Shell's.
type ShellSession struct {
	*session.Shell
}

// NewShellSession starts a shell (SessionOptions.Shell, default /bin/sh) in
// the box.
func (b *Box) NewShellSession(ctx context.Context, opts SessionOptions) (*ShellSession, error) {
	s, err := session.NewShell(ctx, b.sessionStarter(), b.sessionDefaults(opts), b.holdAwake)
	if err != nil {
		return nil, err
	}
	return &ShellSession{s}, nil
}

// Exec runs argv in the session's shell, each argument quoted as one word
// (never joined into a script), and returns its exit code and output. The
// command may be a builtin (cd, export, eval "SCRIPT" for shell code) or a
// function defined earlier; its stdin is /dev/null. env applies to this
// command only: it then runs in a subshell, so its own changes to the shell
// do not stay. A timeout (0: none) sends SIGINT to the command and returns
// ErrTimeout, the shell keeping its state; a command still running after
// the grace period is killed with the shell, which is started again (the
// error wraps ErrSessionRestarted). If the command ends the shell (exit,
// exec), the result is the shell's exit and the next Exec gets a new shell.
func (s *ShellSession) Exec(ctx context.Context, argv []string, env map[string]string, timeout time.Duration) (*ExecResult, error) {
	return s.ExecLimit(ctx, argv, env, timeout, 0)
}

// ExecLimit is Exec keeping at most limit bytes of each stream (0: the
// session's SessionOptions.OutputLimit).
func (s *ShellSession) ExecLimit(ctx context.Context, argv []string, env map[string]string, timeout time.Duration, limit int64) (*ExecResult, error) {
	r, err := s.Shell.Exec(ctx, argv, env, timeout, limit)
	if r == nil {
		return nil, err
	}
	return &ExecResult{ExitStatus: ExitStatus{Code: r.Code, Signal: r.Signal, TimedOut: r.TimedOut},
		Stdout: r.Stdout, Stderr: r.Stderr, StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated}, err
}

// sessionDefaults fills in what a session takes from its box's runtime.
func (b *Box) sessionDefaults(o SessionOptions) SessionOptions {
	if o.OutputLimit == 0 {
		o.OutputLimit = b.rt.outputLimit
	}
	return o
}

func (b *Box) sessionStarter() session.Starter {
	return func(ctx context.Context, argv []string, o SessionOptions) (session.Process, error) {
		cmd := Command{Argv: argv, Env: o.Env, Cwd: o.Cwd, User: o.User, Stdin: true, Detachable: true, ID: o.Name}
		if o.Name != "" {
			// A named session takes over the process of its name the box
			// still runs (an earlier client's, a paused box's, a fork's
			// source's), else starts one under the name.
			e, err := b.attachExec(ctx, o.Name, true)
			switch {
			case err == nil:
				p := newSessionProc(b, e)
				p.named, p.adopted = true, true
				return p, nil
			case errors.Is(err, errdefs.ErrAlreadyExists):
				return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "session %s of box %s is held by another client (one at a time)", o.Name, b.rec.ID)
			case !errors.Is(err, errdefs.ErrNotFound):
				return nil, err
			}
			e, err = b.Exec(ctx, cmd)
			if err != nil {
				return nil, err
			}
			p := newSessionProc(b, e)
			p.named = true
			return p, nil
		}
		e, err := b.Exec(ctx, cmd)
		if errors.Is(err, errdefs.ErrUnsupported) { // an agent without detachable executions
			cmd.Detachable = false
			e, err = b.Exec(ctx, cmd)
			if err != nil {
				return nil, err
			}
			return execProc(e), nil
		}
		if err != nil {
			return nil, err
		}
		return newSessionProc(b, e), nil
	}
}

// execProc is a session's process in a box: an Execution, which leads a
// process group of its own (the agent starts every exec so).
func execProc(e *Execution) session.Process {
	return session.ExecProcess(e, e.Stdin, e.Stdout, e.Stderr, ExitStatus.session)
}

// session is how the session engine sees an exit.
func (st ExitStatus) session() session.ExitStatus {
	return session.ExitStatus{Code: st.Code, Signal: st.Signal}
}
