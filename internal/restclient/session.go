package restclient

import (
	"context"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/session"
)

// NewPythonSession starts a Python interpreter in the box over a REST
// execution (internal/session drives it as it drives a local one).
func (b *Box) NewPythonSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.Session, error) {
	return session.NewPython(ctx, b.starter(), b.sessionDefaults(opts), nil)
}

// NewShellSession starts a shell in the box over a REST execution.
func (b *Box) NewShellSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.ShellSession, error) {
	s, err := session.NewShell(ctx, b.starter(), b.sessionDefaults(opts), nil)
	if err != nil {
		return nil, err
	}
	return &boxlite.ShellSession{Shell: s}, nil
}

// NewCodeContext starts a code context in the box over REST executions.
func (b *Box) NewCodeContext(ctx context.Context, language string, opts boxlite.SessionOptions) (*boxlite.CodeContext, error) {
	cwd := opts.Cwd
	if cwd == "" {
		cwd = b.Info().Config.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	return boxlite.NewCodeContextWith(ctx, language, b.starter(), b.sessionDefaults(opts), nil, cwd)
}

func (b *Box) sessionDefaults(o boxlite.SessionOptions) boxlite.SessionOptions {
	if o.OutputLimit == 0 {
		o.OutputLimit = b.c.outputLimit
	}
	return o
}

func (b *Box) starter() session.Starter {
	return func(ctx context.Context, argv []string, o session.Options) (session.Process, error) {
		if o.Name != "" {
			return nil, errdefs.Errorf(errdefs.ErrUnsupported, "session name %q: named sessions need a local runtime (BoxLite's REST API has no executions that outlive their client)", o.Name)
		}
		e, err := b.Exec(ctx, boxlite.Command{Argv: argv, Env: o.Env, Cwd: o.Cwd, User: o.User, Stdin: true})
		if err != nil {
			return nil, err
		}
		return proc(e), nil
	}
}

// proc is a session's process: a REST execution.
func proc(e *Execution) session.Process {
	return session.ExecProcess(e, e.Stdin, e.Stdout, e.Stderr, func(st boxlite.ExitStatus) session.ExitStatus {
		return session.ExitStatus{Code: st.Code, Signal: st.Signal}
	})
}
