//go:build linux

package agent

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Parked processes (protocol.TPark): a template VM starts a session's
// interpreter before it is saved, so every box restored from it has one
// that already paid its start. The first exec that asks for exactly the
// parked request takes it over, with the output it wrote so far; any other
// request spawns as usual.

const (
	maxParked   = 4                      // per connection
	parkTimeout = 60 * time.Second       // for the process to settle
	parkSample  = 25 * time.Millisecond  // between looks at its state
	parkQuiet   = 4                      // idle looks in a row that make it settled
	parkMinWait = 100 * time.Millisecond // a process that has not run yet also looks idle
)

type parkedExec struct {
	req protocol.Exec
	e   *execution
}

// park starts req's process, waits until it settles and holds it.
func (s *server) park(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "park on stream 0: it needs a stream id of its own"))
		return
	}
	var req protocol.Exec
	if err := protocol.Decode(f, &req); err != nil {
		s.failStream(id, err)
		return
	}
	s.mu.Lock()
	n := len(s.parked)
	s.mu.Unlock()
	if n >= maxParked {
		s.sendError(id, errdefs.Errorf(errdefs.ErrLimit, "park: %d processes are parked, the limit", n))
		return
	}
	e, err := s.spawn(0, req)
	if err != nil {
		s.sendError(id, err)
		return
	}
	go func() {
		defer e.guard("park")
		if err := e.settle(parkTimeout); err != nil {
			e.abort()
			s.sendError(id, err)
			return
		}
		s.mu.Lock()
		s.parked = append(s.parked, parkedExec{req: req, e: e})
		s.mu.Unlock()
		s.cfg.Logf("parked pid %d: %s", e.boxPid, req.Argv[0])
		if f, err := protocol.Encode(protocol.TParked, id, protocol.Started{Pid: e.boxPid}); err == nil {
			s.write(f)
		}
	}()
}

// adopt returns the live parked process of exactly req, now stream id's,
// or nil. One that matches but died is dropped on the way (only a match
// costs a look at /proc: every exec comes through here).
func (s *server) adopt(id uint32, req protocol.Exec) *execution {
	var dead []*execution
	defer func() {
		for _, e := range dead {
			e.abort()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(s.parked); i++ {
		p := s.parked[i]
		if !sameExec(p.req, req) {
			continue
		}
		s.parked = slices.Delete(s.parked, i, i+1)
		i--
		if !p.e.alive() {
			dead = append(dead, p.e)
			continue
		}
		p.e.id = id
		s.cfg.Logf("exec %d: takes over parked pid %d", id, p.e.boxPid)
		return p.e
	}
	return nil
}

// dropParked kills every parked process (the connection ended).
func (s *server) dropParked() {
	s.mu.Lock()
	all := s.parked
	s.parked = nil
	s.mu.Unlock()
	for _, p := range all {
		p.e.abort()
	}
}

// alive reports whether the process is still running (not reaped, and
// not a zombie the reaper has yet to reap).
func (e *execution) alive() bool {
	select {
	case <-e.exitCh:
		return false
	default:
	}
	f, err := procStat(e.pid)
	return err == nil && f[0] != "Z" && f[0] != "X"
}

// sameExec reports whether two requests ask for the same process (an
// absent and an empty list are the same).
func sameExec(a, b protocol.Exec) bool {
	if !slices.Equal(a.Argv, b.Argv) || !slices.Equal(a.Env, b.Env) {
		return false
	}
	a.Argv, a.Env, b.Argv, b.Env = nil, nil, nil, nil
	a.Detach, b.Detach = "", "" // a parked process may become detachable
	return reflect.DeepEqual(a, b)
}

// settle waits until the process sits idle: asleep, with the same CPU time,
// parkQuiet looks in a row (an interpreter that finished its imports and
// waits for input). It fails if the process exits or the time runs out.
func (e *execution) settle(timeout time.Duration) error {
	start := time.Now()
	last, quiet := "", 0
	for {
		select {
		case <-e.exitCh:
			return errdefs.Errorf(errdefs.ErrInvalidState, "park: the process exited while starting (status %#x)", uint32(e.status))
		case <-time.After(parkSample):
		}
		f, err := procStat(e.pid)
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInternal, "park: %v", err)
		}
		ticks := f[11] + " " + f[12] // utime stime
		if f[0] == "S" && ticks == last {
			quiet++
		} else {
			quiet = 0
		}
		last = ticks
		if quiet >= parkQuiet && time.Since(start) >= parkMinWait {
			return nil
		}
		if time.Since(start) > timeout {
			return errdefs.Errorf(errdefs.ErrTimeout, "park: the process did not settle within %s", timeout)
		}
	}
}

// procStat returns the fields of /proc/PID/stat after the command name,
// which may hold anything: state, ppid, pgrp, session, ... (at least 13).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}
