package boxlite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// newExecution makes the host side of an exec stream on c. A detachable
// one gets its ID now (it names the exec to the agent) and credits its
// output as it is read (see Command.Detachable).
func newExecution(c *conn, hello protocol.Hello, argv []string, tty, stdin, detachable bool) *Execution {
	e := &Execution{argv: argv, conn: c, done: make(chan struct{}), stdin: newSendWindow(protocol.InitialWindow), tty: tty,
		groupSignal: hello.Has(protocol.FeatureSignalGroup)}
	credit := func(fd int) func(int) {
		return func(n int) { c.send(protocol.TCredit, e.id, protocol.Credit{Fd: fd, Bytes: n}) }
	}
	e.stdout, e.stderr = newWindow(credit(1)), newWindow(credit(2))
	if detachable {
		e.xid = newID()
		e.stdout.batch, e.stderr.batch = 1, 1
	}
	e.Stdout, e.Stderr = e.stdout, e.stderr
	if stdin {
		e.Stdin = stdinWriter{e}
	}
	return e
}

// AttachExec resumes the detachable execution id (Execution.ID of one
// started with Command.Detachable) of this box, from this or another
// process: the Execution returned reads the output the previous one did
// not read, then the live output, and its Wait, Stdin, Signal, Resize and
// Kill work as a fresh one's (Stdin is nil when the process was started
// without it). One Execution holds a process at a time: while another is
// attached, ErrAlreadyExists. An id the box does not know (never
// detachable, or ended and forgotten: the box keeps an exit status
// protocol.DetachedExitKeep, at most protocol.MaxDetachedExits of them)
// is ErrNotFound, as is any id of a box that is not running; an agent
// without detachable executions is ErrUnsupported.
func (b *Box) AttachExec(ctx context.Context, id string) (*Execution, error) {
	return b.attachExec(ctx, id, false)
}

// attachExec is AttachExec; live refuses an execution that has ended
// (protocol.Attach.Live), which the box then forgets.
func (b *Box) attachExec(ctx context.Context, id string, live bool) (*Execution, error) {
	if err := protocol.CheckDetachID("attach exec", id); err != nil {
		return nil, err
	}
	b.refresh()
	if s := b.State(); s != StateRunning && s != StatePaused { // a paused box's executions wait in it
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "attach exec %s: box %s is %s: its executions ended with its last run", id, b.rec.ID, s)
	}
	c, info, err := b.running(ctx, "attach exec")
	if err != nil {
		return nil, err
	}
	if !info.Hello.Has(protocol.FeatureExecDetach) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "attach exec %s: box %s runs an agent without detachable executions (%s)", id, b.rec.ID, info.Hello.Agent)
	}
	e := newExecution(c, info.Hello, []string{"attached:" + id}, false, true, true)
	e.xid, e.limit = id, b.rt.outputLimit
	a := &attaching{Execution: e, first: make(chan error, 1)}
	sid, err := c.open(a, protocol.TAttach, protocol.Attach{ID: id, Live: live})
	if err != nil {
		return nil, fmt.Errorf("attach exec %s: %w", id, err)
	}
	timer := time.NewTimer(requestTimeout)
	defer timer.Stop()
	select {
	case err = <-a.first:
	case <-timer.C:
		err = errdefs.Errorf(errdefs.ErrTimeout, "attach exec %s: no answer from box %s within %s", id, b.rec.ID, requestTimeout)
	case <-ctx.Done():
		err = errdefs.Errorf(errdefs.ErrTimeout, "attach exec %s: %v", id, ctx.Err())
	}
	if err != nil {
		// A late Started would hold the exec on a stream nobody reads:
		// cancelling it detaches the exec again.
		c.send(protocol.TCancel, sid, nil)
		c.forget(sid)
		return nil, fmt.Errorf("attach exec %s: %w", id, err)
	}
	if !a.stdin {
		e.Stdin = nil
	}
	return e, nil
}

// attaching routes an attach stream's frames to its Execution, and reports
// the first: Started (the exec is ours, with its terminal and stdin
// settings) or Error (it is not).
type attaching struct {
	*Execution
	once  sync.Once
	first chan error
	stdin bool // set before first is sent
}

func (a *attaching) frame(f protocol.Frame) {
	a.once.Do(func() {
		switch f.Type {
		case protocol.TStarted:
			var st protocol.Started
			if err := protocol.Decode(f, &st); err != nil {
				a.first <- err
				return
			}
			a.tty, a.stdin = st.Tty, st.Stdin
			a.first <- nil
		case protocol.TError:
			var pe protocol.Error
			err := protocol.Decode(f, &pe)
			if err == nil {
				err = pe.Err()
			}
			a.first <- err
		default:
			a.first <- errdefs.Errorf(errdefs.ErrInvalidArgument, "%s frame before started", f.Type)
		}
	})
	a.Execution.frame(f)
}

func (a *attaching) fail(err error) {
	a.once.Do(func() { a.first <- err })
	a.Execution.fail(err)
}
