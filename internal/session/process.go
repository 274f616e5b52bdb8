package session

import (
	"context"
	"io"
	"strings"
	"sync"
	"syscall"
)

// Process is a session's interpreter or shell as the session drives it:
// an execution in a box, or a local process in tests. The process leads a
// process group of its own.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Signal delivers sig to the process.
	Signal(sig syscall.Signal) error
	// SignalGroup delivers sig to the process's group: the process and what
	// it started (a shell's running command).
	SignalGroup(sig syscall.Signal) error
	// Kill ends the process with its group, abandoning its output; Wait
	// then returns at once.
	Kill() error
	// Wait returns how the process ended, once its outputs have ended (or
	// it was killed).
	Wait() (ExitStatus, error)
}

// Starter starts argv as a session's process with o's Env, Cwd and User, its
// stdin open. With o.Name (the session's, qualified by its kind), it first
// looks for the process of that name the box still runs and returns it
// adopted (Adopter), else starts argv under that name; a Starter that
// cannot keep processes by name refuses a name (ErrUnsupported).
type Starter func(ctx context.Context, argv []string, o Options) (Process, error)

// Adopter is a Process that may be one a named session left running
// (Options.Name): Adopted reports whether it is, and Detach leaves it
// running for the next session of that name instead of killing it.
type Adopter interface {
	Process
	Adopted() bool
	Detach() error
}

// adopted reports whether p is a named session's process taken over.
func adopted(p Process) bool {
	a, ok := p.(Adopter)
	return ok && a.Adopted()
}

// detachOrKill leaves a named session's process running, else kills it.
func detachOrKill(p Process) {
	if a, ok := p.(Adopter); ok {
		a.Detach()
		return
	}
	p.Kill()
}

// ExitStatus is how a session's process ended. Code is 128+Signal when a
// signal killed it.
type ExitStatus struct {
	Code   int
	Signal int
}

// Execution is what a backend's execution (a local box's, a REST box's)
// offers a session besides its streams, which are fields; S is the
// backend's exit status.
type Execution[S any] interface {
	Signal(sig syscall.Signal) error
	SignalGroup(sig syscall.Signal) error
	Close() error
	Wait(ctx context.Context) (S, error)
}

// ExecProcess is the Process of an execution whose streams are stdin,
// stdout and stderr; status reads how it ended. Kill closes the execution
// (ending it with its process group), so Wait after it returns at once.
func ExecProcess[S any](e Execution[S], stdin io.WriteCloser, stdout, stderr io.Reader, status func(S) ExitStatus) Process {
	return execProcess[S]{e, stdin, stdout, stderr, status}
}

type execProcess[S any] struct {
	e              Execution[S]
	stdin          io.WriteCloser
	stdout, stderr io.Reader
	status         func(S) ExitStatus
}

func (p execProcess[S]) Stdin() io.WriteCloser                { return p.stdin }
func (p execProcess[S]) Stdout() io.Reader                    { return p.stdout }
func (p execProcess[S]) Stderr() io.Reader                    { return p.stderr }
func (p execProcess[S]) Signal(sig syscall.Signal) error      { return p.e.Signal(sig) }
func (p execProcess[S]) SignalGroup(sig syscall.Signal) error { return p.e.SignalGroup(sig) }
func (p execProcess[S]) Kill() error                          { return p.e.Close() }
func (p execProcess[S]) Wait() (ExitStatus, error) {
	st, err := p.e.Wait(context.Background()) // after Kill, at once
	return p.status(st), err
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
