package restapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// chunkSize is the most one output read takes: one chunk per stream, read
// only while a client is attached and sent before the next is read, is all
// the server holds of an execution's output.
const chunkSize = 32 << 10

// execution is one process started by POST /exec. Its output is read from
// the box only by an attached client, a chunk at a time, so an unread
// stream holds the process back through the box's own window; and
// nothing is read ahead that a restart of the server would lose.
type execution struct {
	id, boxID, key string
	agentID        string             // x.ID(): the box's name for it (persist.go)
	command        string             // commandSummary
	x              *boxlite.Execution // nil once lost or ended before a restart
	tty            bool
	started        time.Time
	final          *wire.ExecutionInfo // the state of an execution without x
	notify         chan struct{}       // output or the end may have arrived

	mu       sync.Mutex
	pending  [2][]byte // a chunk taken by a client that failed to send it
	attached bool
	idle     time.Time // when the last client left (or the start)
	ended    time.Time // zero while running
	exit     boxlite.ExitStatus
	waitErr  error
	killed   bool
	exited   chan struct{}   // closed when the process has ended
	kick     chan struct{}   // closed to end an attached client (kill, evict)
	stop     <-chan struct{} // the registry's: closed when the API closes (the server stops)
}

func newExecID() string {
	var b [12]byte
	rand.Read(b[:])
	return "exec-" + hex.EncodeToString(b[:])
}

// start watches the output and waits for the end, which it records.
func (e *execution) start(store *execStore) {
	e.notify = make(chan struct{}, 1)
	e.x.Notify(func() {
		select {
		case e.notify <- struct{}{}:
		default:
		}
	})
	go func() {
		st, err := e.x.Wait(context.Background())
		e.mu.Lock()
		e.exit, e.waitErr, e.ended = st, err, time.Now()
		e.mu.Unlock()
		close(e.exited)
		if err != nil && !st.TimedOut {
			// Not an exit: the connection to the box ended (this server
			// is stopping, or the box is gone). The record stays as it
			// is: the next server attaches again or finds it lost.
			return
		}
		rec := e.record()
		in := e.info()
		rec.Final = &in
		store.save(rec)
	}()
}

// info is the execution's state as the API shows it.
func (e *execution) info() wire.ExecutionInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.final != nil {
		return *e.final
	}
	in := wire.ExecutionInfo{ExecutionID: e.id, Status: "running", StartedAt: e.started.UTC().Format(time.RFC3339Nano)}
	if e.ended.IsZero() {
		return in
	}
	code := e.exit.Code
	d := e.ended.Sub(e.started).Milliseconds()
	in.ExitCode, in.DurationMs = &code, &d
	switch {
	case e.killed:
		in.Status = "killed"
	case e.exit.TimedOut:
		in.Status = "timed_out"
	default:
		in.Status = "completed"
	}
	if e.waitErr != nil {
		msg := e.waitErr.Error()
		in.ErrorMessage = &msg
	} else if e.exit.Signal != 0 {
		msg := "killed by signal " + syscall.Signal(e.exit.Signal).String()
		in.ErrorMessage = &msg
	}
	return in
}

// registry holds the executions the API started, until they are removed,
// their box goes, or the janitor's limits pass.
type registry struct {
	lim   Limits
	store *execStore
	mu    sync.Mutex
	m     map[string]*execution
	stop  chan struct{}
}

func newRegistry(lim Limits, store *execStore) *registry {
	return &registry{lim: lim, store: store, m: map[string]*execution{}, stop: make(chan struct{})}
}

func (g *registry) close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
}

// add registers e if its key has room for one more running execution.
func (g *registry) add(e *execution) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	running := 0
	for _, o := range g.m {
		if o.key == e.key && !o.isEnded() {
			running++
		}
	}
	if running >= g.lim.ExecsPerKey {
		return newError(errQuota, "key %q has %d executions running, its limit", e.key, running)
	}
	g.m[e.id] = e
	g.store.save(e.record())
	return nil
}

func (e *execution) isEnded() bool {
	select {
	case <-e.exited:
		return true
	default:
		return false
	}
}

// get is the execution id of box boxID.
func (g *registry) get(boxID, id string) (*execution, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.m[id]
	if !ok || e.boxID != boxID {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "execution %s of box %s: not found (it may have ended more than its retention ago)", id, boxID)
	}
	return e, nil
}

// evict forgets an execution, ending its client.
func (g *registry) evict(e *execution) {
	g.mu.Lock()
	if g.m[e.id] == e {
		delete(g.m, e.id)
		g.store.remove(e.id)
	}
	g.mu.Unlock()
	e.mu.Lock()
	select {
	case <-e.kick:
	default:
		close(e.kick)
	}
	e.mu.Unlock()
	if e.x != nil {
		_ = e.x.Close() // a running one detaches: it is killed before (DELETE) or its box is gone
	}
}

// ofBox is the executions of box boxID, oldest first.
func (g *registry) ofBox(boxID string) []*execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*execution
	for _, e := range g.m {
		if e.boxID == boxID {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].started.Before(out[j].started) })
	return out
}

// forgetBox evicts a removed box's executions.
func (g *registry) forgetBox(boxID string) {
	g.mu.Lock()
	var gone []*execution
	for _, e := range g.m {
		if e.boxID == boxID {
			gone = append(gone, e)
		}
	}
	g.mu.Unlock()
	for _, e := range gone {
		g.evict(e)
	}
}

func (g *registry) count() (running, retained int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.m {
		if e.isEnded() {
			retained++
		} else {
			running++
		}
	}
	return
}

// janitor kills executions left without a client for ExecIdle and forgets
// ended ones ExecRetention after their end, their unread output with them.
func (g *registry) janitor() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.sweep(now)
		}
	}
}

func (g *registry) sweep(now time.Time) {
	g.mu.Lock()
	var idle, old []*execution
	for _, e := range g.m {
		e.mu.Lock()
		switch {
		case !e.ended.IsZero() && !e.attached && now.Sub(e.ended) > g.lim.ExecRetention:
			old = append(old, e)
		case e.ended.IsZero() && !e.attached && now.Sub(e.idle) > g.lim.ExecIdle:
			idle = append(idle, e)
		}
		e.mu.Unlock()
	}
	g.mu.Unlock()
	for _, e := range idle {
		e.kill()
	}
	for _, e := range old {
		g.evict(e)
	}
}

// kill ends the process (its group too) for good.
func (e *execution) kill() {
	if e.x == nil {
		return
	}
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	if err := e.x.Kill(); err != nil && !errors.Is(err, errdefs.ErrClosed) {
		_ = e.x.SignalGroup(syscall.SIGKILL)
	}
}

// claim makes the caller the execution's one attached client.
func (e *execution) claim() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.attached {
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "execution %s: another client is already attached", e.id)
	}
	e.attached = true
	return nil
}

func (e *execution) release() {
	e.mu.Lock()
	e.attached = false
	e.idle = time.Now()
	e.mu.Unlock()
}
