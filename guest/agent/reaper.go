//go:build linux

package agent

import (
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// reaper owns every wait in the process: one goroutine calls wait4(-1) after
// each SIGCHLD and hands the status of a child to whoever spawned it. Nothing
// else in the agent waits (no exec.Cmd.Wait), so no status is ever stolen, and
// orphans re-parented to PID 1 are reaped and dropped.
//
// The spawn/reap race (a child exits and is reaped before its pid is
// registered) is closed by holding mu across fork and registration: the
// reaper looks a pid up under mu, so it waits until the spawner has recorded
// it. A pid that is unknown at lookup is therefore never one of ours.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]func(unix.WaitStatus)
}

var (
	theReaper  *reaper
	reaperOnce sync.Once
)

// getReaper starts the process-wide reaper on first use. The agent must be the
// only code in its process that creates children.
func getReaper() *reaper {
	reaperOnce.Do(func() {
		theReaper = &reaper{waiting: make(map[int]func(unix.WaitStatus))}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, unix.SIGCHLD)
		go theReaper.loop(ch)
	})
	return theReaper
}

func (r *reaper) loop(ch <-chan os.Signal) {
	for {
		r.reapAll()
		<-ch
	}
}

func (r *reaper) reapAll() {
	for {
		var ws unix.WaitStatus
		// Reaped under the lock: a spawn under way (which holds it) still
		// finds its child, zombie or not, when it reads the child's pid in
		// the sandbox's namespace; reaped, the child would have none.
		r.mu.Lock()
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		var fn func(unix.WaitStatus)
		if err == nil && pid > 0 {
			fn = r.waiting[pid]
			delete(r.waiting, pid)
		}
		r.mu.Unlock()
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if fn != nil {
			fn(ws)
		}
	}
}

// spawn runs start (a fork) with the registry locked and registers onExit for
// the new pid before any status for it can be looked up.
func (r *reaper) spawn(start func() (int, error), onExit func(unix.WaitStatus)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err == nil {
		r.waiting[pid] = onExit
	}
	return pid, err
}
