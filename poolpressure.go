package boxlite

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Warm pools give memory back when the host runs short of it. The kernel
// says so (Linux PSI: a trigger on /proc/pressure/memory fires, pollable,
// when tasks stalled on memory for longer than a threshold within a
// window); nothing polls. On each event every pool removes half of its
// ready boxes (at least one; the newest first, as hand-overs take the
// oldest) and stops refilling; once no event has come for a quiet period
// (pressureQuiet), the pools refill as after a hand-over, each start still
// admitted against MemAvailable and the host reserve (admit.go).
//
// Pool boxes are removed, not paused: a pause writes the box's memory to
// disk (about 39 MiB for an idle 128 MiB box) while the host is short of
// memory, and a paused box resumes no faster than a template starts a new
// one (docs/NOTES.md: 962 vs 1301 ms), which is what a refill does.

// A pressureSource reports host memory pressure: Wait returns at the next
// event (nil), or an error once the source is closed or broken.
type pressureSource interface {
	Wait() error
	Close() error
}

// psiStall and psiWindow are the PSI trigger: some task stalled on memory
// for 200 ms of a 2 s window (10%). An unprivileged process may set a
// trigger only with a window that is a multiple of 2 s.
const (
	psiStall  = 200 * time.Millisecond
	psiWindow = 2 * time.Second
)

// pressureQuiet is how long after the last pressure event the pools refill.
const pressureQuiet = 30 * time.Second

// psiTrigger is a PSI trigger on a pressure file (/proc/pressure/memory,
// or a cgroup's memory.pressure).
type psiTrigger struct {
	f            *os.File
	wakeR, wakeW int // Close writes wakeW, so a Wait's poll returns

	mu              sync.Mutex
	waiting, closed bool
}

// openPSI sets a trigger of stall in window on the pressure file at path.
func openPSI(path string, stall, window time.Duration) (*psiTrigger, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "memory pressure trigger: %v", err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil || fs.Type != unix.PROC_SUPER_MAGIC && fs.Type != unix.CGROUP2_SUPER_MAGIC {
		f.Close()
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "memory pressure trigger: %s is not a pressure file of procfs or cgroup2", path)
	}
	spec := fmt.Sprintf("some %d %d", stall.Microseconds(), window.Microseconds())
	if _, err := f.WriteString(spec + "\x00"); err != nil {
		f.Close()
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "memory pressure trigger %q on %s: %v", spec, path, err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory pressure trigger: %w", err)
	}
	return &psiTrigger{f: f, wakeR: p[0], wakeW: p[1]}, nil
}

// Wait blocks in poll until the trigger fires or is closed; one Wait at a
// time.
func (t *psiTrigger) Wait() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrClosed, "memory pressure trigger closed")
	}
	t.waiting = true
	t.mu.Unlock()
	err := t.poll()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting = false
	if t.closed {
		t.release() // Close left the descriptors to this poll
	}
	return err
}

func (t *psiTrigger) poll() error {
	fds := []unix.PollFd{{Fd: int32(t.f.Fd()), Events: unix.POLLPRI}, {Fd: int32(t.wakeR), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1) // both are events: the kernel's, or Close's
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("memory pressure trigger: poll: %w", err)
		case fds[1].Revents != 0:
			return errdefs.Errorf(errdefs.ErrClosed, "memory pressure trigger closed")
		case fds[0].Revents&unix.POLLERR != 0:
			return errors.New("memory pressure trigger: its file is gone (cgroup removed)")
		case fds[0].Revents&unix.POLLPRI != 0:
			return nil
		}
	}
}

// Close ends a Wait in progress (which then closes the descriptors) and
// any later one.
func (t *psiTrigger) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.waiting {
		unix.Write(t.wakeW, []byte{1})
	} else {
		t.release()
	}
	return nil
}

func (t *psiTrigger) release() {
	t.f.Close()
	unix.Close(t.wakeR)
	unix.Close(t.wakeW)
}

// watchPressure shrinks the pools at each event of src, and refills them
// once quiet has passed without one. It returns when ctx ends (closing
// src) or src fails.
func (r *Runtime) watchPressure(ctx context.Context, src pressureSource, quiet time.Duration) {
	events := make(chan error)
	go func() {
		for {
			err := src.Wait()
			select {
			case events <- err:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer src.Close()
	var relief <-chan time.Time
	var timer *time.Timer
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case err := <-events:
			if err != nil {
				log.Printf("boxlite: warm pools: no longer watching host memory pressure: %v", err)
				return
			}
			r.pools.pressed.Store(true)
			removed := r.shrinkPools()
			log.Printf("boxlite: warm pools: host memory pressure: %d pool boxes removed, refills held for %v", removed, quiet)
			if timer == nil {
				timer = time.NewTimer(quiet)
			} else {
				timer.Reset(quiet)
			}
			relief = timer.C
		case <-relief:
			relief = nil
			r.pools.pressed.Store(false)
			for _, p := range r.pools.list {
				p.kickRefill()
			}
			r.pools.notify()
		}
	}
}

// shrinkPools removes half of each pool's ready boxes (at least one) and
// returns how many it removed.
func (r *Runtime) shrinkPools() int {
	var drop []*Box
	for _, p := range r.pools.list {
		p.mu.Lock()
		if n := len(p.ready); n > 0 {
			keep := n / 2
			drop = append(drop, p.ready[keep:]...)
			p.ready = append([]*Box(nil), p.ready[:keep]...)
		}
		p.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, b := range drop {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := b.Remove(ctx, true); err != nil {
				log.Printf("boxlite: warm pools: remove pool box %s under memory pressure: %v", b.rec.ID, err)
			}
		}()
	}
	wg.Wait()
	if len(drop) > 0 {
		r.pools.notify()
	}
	return len(drop)
}

// hostPressure is the default pressure source: a PSI trigger on the host's
// memory pressure.
func hostPressure() (pressureSource, error) {
	t, err := openPSI("/proc/pressure/memory", psiStall, psiWindow)
	if err != nil {
		return nil, err
	}
	return t, nil
}
