package boxlite

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"

	"github.com/boxlite/boxlite/internal/capbuf"
)

// Command describes a process to run in a box. Argv is passed as is, never
// joined into a shell string; empty, it is the box's DefaultCommand (its
// entrypoint and cmd).
type Command struct {
	Argv    []string
	Env     map[string]string // added to the image's and the box's environment
	Cwd     string            // default: the box's, else the image's WorkingDir, else /
	User    string            // name, uid or uid:gid; default: the box's, else the image's User
	Timeout time.Duration     // 0: none. Enforced in the guest: TERM, then KILL after Grace
	Grace   time.Duration     // default 2s
	Stdin   bool              // keep stdin open for Execution.Stdin; otherwise it reads /dev/null
	// Tty runs the process on a pseudo-terminal in the box, as a login
	// session would: stdin, stdout and stderr are the terminal (Stdout
	// carries everything it shows, echoed input included; Stderr stays
	// empty), it leads a session of its own with the terminal as its
	// controlling terminal, and TERM is xterm unless Env sets it. Closing
	// Stdin types the terminal's EOF character (^D) rather than closing
	// anything; Execution.Resize changes the size.
	Tty bool
	// Rows and Cols are the terminal's initial size with Tty; default 24x80.
	Rows, Cols int
	// Detachable lets the process outlive this Execution: Close, the end of
	// the connection to the box (Runtime.Close, this process exiting or
	// being killed) leave it running, and Box.AttachExec with the
	// Execution's ID resumes it with every output byte that was not read
	// here, then the exit. Output is acknowledged to the box as it is read
	// (not in batches), so a resumed execution starts exactly after the
	// last byte read. While nobody is attached the box keeps at most a
	// window (256 KiB) per stream and the process then blocks on its
	// writes. Needs an agent with protocol.FeatureExecDetach
	// (ErrUnsupported otherwise). Kill ends it.
	Detachable bool
	// ID names a Detachable execution (Execution.ID, Box.AttachExec):
	// 1 to 64 of [A-Za-z0-9_-]. Default: 12 random hex digits. The box
	// refuses an ID one of its detachable executions holds (the error of
	// Wait is ErrAlreadyExists).
	ID string
	// OutputLimit caps how many bytes of each stream Box.Run (Collect)
	// keeps; the rest is read and dropped and the result is marked
	// truncated. Default (0): the runtime's, DefaultOutputLimit (64 MiB)
	// unless WithOutputLimit changed it. Streaming reads are not capped.
	OutputLimit int64
	// Root, when set, runs the process with that directory of the box as
	// its root (chroot), as a container's process: an absolute path as the
	// box sees it, e.g. under a volume's guest path. The box's /proc, /dev
	// and /sys are bound onto the root's directories of those names. Env,
	// Cwd and User are then the command's alone (the image's and the box's
	// are not merged: they describe another root), User is looked up in
	// the root's /etc/passwd (default root), Cwd defaults to /. Needs an
	// agent with protocol.FeatureExecRoot (ErrUnsupported otherwise).
	Root string
	// RootBinds (with Root) bind directories or files of the box into the
	// root the first time it is used (a container's volumes); later
	// commands in the same root find them there. At most
	// protocol.MaxRootBinds.
	RootBinds []RootBind
	// Groups, when set, are the process's supplementary groups instead of
	// those the box's /etc/group gives User (an OCI process's
	// additionalGids). At most protocol.MaxGroups.
	Groups []uint32
	// Rlimits are set on the process before its program runs (an OCI
	// process's rlimits), hard limits above the box's default included.
	// Both need an agent with protocol.FeatureExecRlimits
	// (ErrUnsupported otherwise).
	Rlimits []Rlimit
}

// Rlimit is a resource limit of a Command: Type as OCI names it
// ("RLIMIT_NOFILE", ...), soft and hard values (1<<64-1: unlimited).
type Rlimit struct {
	Type       string
	Soft, Hard uint64
}

// RootBind binds Source, a path of the box, at Target in a Command's Root
// (made if missing).
type RootBind struct {
	Source, Target string
	ReadOnly       bool
}

// Default terminal size of a Command with Tty.
const (
	DefaultRows = abi.DefaultRows
	DefaultCols = abi.DefaultCols
)

// ExitStatus is how a process ended. Code is 128+Signal when a signal killed it.
type ExitStatus struct {
	Code     int
	Signal   int
	TimedOut bool
}

// ExecResult is a finished process with its collected output.
type ExecResult struct {
	ExitStatus
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated report that the stream printed
	// more than the output limit and only its first bytes were kept.
	StdoutTruncated, StderrTruncated bool
}

// Execution is a running process. Read Stdout and Stderr concurrently (or
// neither): like pipes, each holds a bounded window and the process blocks
// when one is full. With Command.Tty, Stdout is the terminal's output and
// Stderr ends empty.
type Execution struct {
	Stdout io.Reader
	Stderr io.Reader
	Stdin  io.WriteCloser // nil unless Command.Stdin

	argv    []string
	timeout time.Duration
	limit   int64 // Collect's output limit
	conn    *conn
	id      uint32
	stdout  *window
	stderr  *window
	stdin   *sendWindow
	pid     atomic.Int64 // set by the connection's reader
	tty     bool
	xid     string // Execution.ID
	// groupSignal: the agent signals process groups (FeatureSignalGroup).
	groupSignal bool
	lane        execLane // execlane.go

	once   sync.Once
	done   chan struct{}
	status ExitStatus
	err    error
}

func (e *Execution) bind(id uint32) {
	e.id = id
	if e.xid == "" {
		e.xid = newID()
	}
}

// ID names the execution (12 hex digits, unique in practice): BoxLite's
// Execution.id, for logs and for telling executions apart. A detachable
// one (Command.Detachable) is resumed by it (Box.AttachExec).
func (e *Execution) ID() string { return e.xid }

func (e *Execution) finish(st ExitStatus, err error) {
	e.once.Do(func() {
		e.status, e.err = st, err
		end := err
		if end == nil {
			end = io.EOF
		}
		e.laneEnd(false)
		close(e.done) // before the windows end, so whoever sees EOF sees Done
		e.stdout.close(end)
		e.stderr.close(end)
		e.stdin.close(errdefs.Errorf(errdefs.ErrClosed, "stdin: process has exited"))
	})
}

func (e *Execution) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStarted:
		var s protocol.Started
		if protocol.Decode(f, &s) == nil {
			e.pid.Store(int64(s.Pid))
		}
	case protocol.TStdout:
		if err := e.stdout.push(f.Payload); err != nil {
			e.conn.violation(fmt.Errorf("exec %s: stdout: %w", quoteArgv(e.argv), err))
		}
	case protocol.TStderr:
		if err := e.stderr.push(f.Payload); err != nil {
			e.conn.violation(fmt.Errorf("exec %s: stderr: %w", quoteArgv(e.argv), err))
		}
	case protocol.TLaneAsk:
		e.onLaneAsk()
	case protocol.TLane:
		e.onLane(f)
	case protocol.TCredit:
		var c protocol.Credit
		err := protocol.Decode(f, &c)
		if err == nil && c.Fd != 0 {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "credit for fd %d: only stdin (0) takes credit", c.Fd)
		}
		if err == nil {
			err = e.stdin.give(c.Bytes)
		}
		if err != nil {
			e.conn.violation(fmt.Errorf("exec %s: stdin: %w", quoteArgv(e.argv), err))
		}
	case protocol.TExit:
		var x protocol.Exit
		if err := protocol.Decode(f, &x); err != nil {
			e.conn.violation(fmt.Errorf("exec %s: exit: %w", quoteArgv(e.argv), err))
			return
		}
		e.laneEnd(true)
		st := ExitStatus{Code: x.Code, Signal: x.Signal, TimedOut: x.TimedOut}
		var err error
		if x.TimedOut {
			err = errdefs.Errorf(errdefs.ErrTimeout, "exec %s: timed out after %s", quoteArgv(e.argv), e.timeout)
		}
		e.finish(st, err)
	case protocol.TError:
		var pe protocol.Error
		err := protocol.Decode(f, &pe)
		if err == nil {
			err = pe.Err()
		}
		e.finish(ExitStatus{Code: -1}, err)
	}
}

func (e *Execution) fail(err error) {
	e.finish(ExitStatus{Code: -1}, fmt.Errorf("exec %s: %w", quoteArgv(e.argv), err))
}

// Wait blocks until the process has exited and its output was delivered to
// the windows. A timeout returns the status and an ErrTimeout error; ctx only
// bounds the waiting, it does not stop the process (use Kill).
func (e *Execution) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-e.done:
		return e.status, e.err
	case <-ctx.Done():
		return ExitStatus{Code: -1}, errdefs.Errorf(errdefs.ErrTimeout, "wait for exec %s: %v", quoteArgv(e.argv), ctx.Err())
	}
}

// Notify registers f to be called, from any goroutine and without locks
// held, whenever output arrives or the process ends: the hook for event loops
// that poll with ReadNonblock. f must not block.
func (e *Execution) Notify(f func()) {
	e.stdout.setNotify(f)
	e.stderr.setNotify(f)
	f() // whatever arrived before registration
}

// ReadNonblock reads what is buffered of fd 1 (stdout) or 2 (stderr): n > 0
// bytes; (0, nil) when nothing is buffered yet; (0, io.EOF) at the end (or
// the error that ended the stream).
func (e *Execution) ReadNonblock(fd int, p []byte) (int, error) {
	switch fd {
	case 1:
		return e.stdout.read(p, false)
	case 2:
		return e.stderr.read(p, false)
	}
	return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "read: fd %d is neither 1 (stdout) nor 2 (stderr)", fd)
}

// Pending reports, without consuming anything, whether a read of fd would
// return now: buffered bytes, or the end of the stream.
func (e *Execution) Pending(fd int) bool {
	switch fd {
	case 1:
		return e.stdout.pending()
	case 2:
		return e.stderr.pending()
	}
	return false
}

// Done is closed when the process has ended.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Pid is the process id in the guest, 0 until started.
func (e *Execution) Pid() int { return int(e.pid.Load()) }

// Signal delivers sig to the process.
func (e *Execution) Signal(sig syscall.Signal) error {
	select {
	case <-e.done:
		return errdefs.Errorf(errdefs.ErrInvalidState, "signal exec %s: process has exited", quoteArgv(e.argv))
	default:
	}
	return e.conn.send(protocol.TSignal, e.id, protocol.Signal{Signal: int(sig)})
}

// SignalGroup delivers sig to the process's group: the process leads one
// (the agent starts every exec so), which holds what it started unless
// that made groups of its own (with Tty, every group of its session). An
// agent too old to do it is ErrUnsupported.
func (e *Execution) SignalGroup(sig syscall.Signal) error {
	if !e.groupSignal {
		return errdefs.Errorf(errdefs.ErrUnsupported, "signal exec %s's process group: the box runs an agent without it; restart the box to update it", quoteArgv(e.argv))
	}
	select {
	case <-e.done:
		return errdefs.Errorf(errdefs.ErrInvalidState, "signal exec %s: process has exited", quoteArgv(e.argv))
	default:
	}
	return e.conn.send(protocol.TSignal, e.id, protocol.Signal{Signal: int(sig), Group: true})
}

// Resize sets the size of the process's terminal (Command.Tty); the
// kernel then sends SIGWINCH to the terminal's foreground process group. An
// execution without a terminal is ErrInvalidState; a size of 0 or more than
// 65535 is ErrInvalidArgument.
func (e *Execution) Resize(rows, cols int) error {
	if !e.tty {
		return errdefs.Errorf(errdefs.ErrInvalidState, "resize exec %s: it has no terminal (Command.Tty)", quoteArgv(e.argv))
	}
	if err := checkTermSize("resize", rows, cols); err != nil {
		return err
	}
	select {
	case <-e.done:
		return errdefs.Errorf(errdefs.ErrInvalidState, "resize exec %s: process has exited", quoteArgv(e.argv))
	default:
	}
	return e.conn.send(protocol.TResize, e.id, protocol.Resize{Rows: rows, Cols: cols})
}

// Tty reports whether the process runs on a terminal (Command.Tty).
func (e *Execution) Tty() bool { return e.tty }

func checkTermSize(op string, rows, cols int) error {
	if rows < 1 || cols < 1 || rows > protocol.MaxTermSize || cols > protocol.MaxTermSize {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: terminal size %dx%d: rows and cols must be 1-%d", op, rows, cols, protocol.MaxTermSize)
	}
	return nil
}

// Kill ends the process with SIGKILL.
func (e *Execution) Kill() error { return e.Signal(syscall.SIGKILL) }

// Close abandons the execution: a running process is killed with its
// process group and its remaining output is dropped. A detachable one
// (Command.Detachable) keeps running instead, its output held for
// Box.AttachExec.
func (e *Execution) Close() error {
	select {
	case <-e.done:
		return nil
	default:
	}
	err := e.conn.send(protocol.TCancel, e.id, nil)
	e.conn.forget(e.id)
	e.finish(ExitStatus{Code: -1}, errdefs.Errorf(errdefs.ErrClosed, "exec %s: closed", quoteArgv(e.argv)))
	return err
}

type stdinWriter struct{ e *Execution }

func (w stdinWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := w.e.stdin.take(min(len(p)-done, protocol.MaxChunk))
		if err != nil {
			return done, err
		}
		f := protocol.Frame{Type: protocol.TStdin, Stream: w.e.id, Payload: p[done : done+n]}
		if err := w.e.conn.sendFrame(f); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

func (w stdinWriter) Close() error { return w.e.conn.send(protocol.TStdinClose, w.e.id, nil) }

// Collect reads all output and waits; the output is kept even when the
// process failed or timed out.
// Each stream keeps at most the execution's output limit (Command.OutputLimit).
func (e *Execution) Collect(ctx context.Context) (*ExecResult, error) {
	var st ExitStatus
	var err error
	out, errb := capbuf.Collect(e.Stdout, e.Stderr, e.limit, func() {
		if st, err = e.Wait(ctx); ctx.Err() != nil {
			e.Close()
		}
	})
	return &ExecResult{ExitStatus: st, Stdout: out.Bytes(), Stderr: errb.Bytes(),
		StdoutTruncated: out.Truncated(), StderrTruncated: errb.Truncated()}, err
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, " ") + "]"
}
