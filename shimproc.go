package boxlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// A box's shim holds the box's lock (shimapi.LockFile) for its whole life
// and writes its pid there first thing, while its socket comes only at the
// end of the boot. So a box whose start is under way, or was interrupted
// with its shim left booting, is found by its lock, not its socket: stop and
// remove end that shim (and its VMM) instead of calling the box stopped.

// proc is a process found by pid, held by a pidfd where the kernel has
// them (Linux 5.3), so that a signal never reaches a process that took the
// pid over; without one, by its start time.
type proc struct {
	pid   int
	fd    int    // pidfd; -1: none
	start uint64 // start time (clock ticks after boot), from /proc/PID/stat
	// ended: a box's shim (lockHolder) that has ended its box and is
	// finishing, not one still booting it (shimapi.LockContent).
	ended bool
}

// openProc opens pid; nil when it is gone (or a zombie).
func openProc(pid int) *proc {
	if pid <= 1 {
		return nil
	}
	p := &proc{pid: pid, fd: -1}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		p.fd = fd
	} else if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return nil // ESRCH: gone
	}
	st, ok := procStat(pid)
	if !ok || st.state == "Z" || st.state == "X" {
		p.close()
		return nil
	}
	p.start = st.start
	return p
}

func (p *proc) close() {
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// signal sends sig to the process itself (not to a process that reused its pid).
func (p *proc) signal(sig syscall.Signal) error {
	if p.fd >= 0 {
		return unix.PidfdSendSignal(p.fd, sig, nil, 0)
	}
	if st, ok := procStat(p.pid); !ok || st.start != p.start {
		return unix.ESRCH
	}
	return unix.Kill(p.pid, sig)
}

// exited reports whether the process has ended (a zombie has: it holds no
// more than its pid, until whoever inherited it reaps it).
func (p *proc) exited() bool {
	if p.fd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	st, ok := procStat(p.pid)
	return !ok || st.start != p.start || st.state == "Z" || st.state == "X"
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if p.exited() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

type statFields struct {
	state string
	ppid  int
	start uint64
}

// procStat reads /proc/PID/stat: state, parent and start time.
func procStat(pid int) (statFields, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statFields{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statFields{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return statFields{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return statFields{state: f[0], ppid: ppid, start: start}, true
}

// descendants opens the live descendants of pid (a shim's VMM, its jail's
// stages, network stack and file daemons), from a scan of /proc.
func descendants(pid int) []*proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(n); ok {
			children[st.ppid] = append(children[st.ppid], n)
		}
	}
	var out []*proc
	queue := children[pid]
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if p := openProc(n); p != nil {
			out = append(out, p)
		}
		queue = append(queue, children[n]...)
	}
	return out
}

// lockHolder returns the shim that holds the box's lock, opened, or nil
// when none does. The pid the lock file names is trusted only when, with
// the process held (a pidfd), that process holds an flock on this very
// file (/proc/locks), has it open, and runs boxlite-shim on this box's
// config: a stale pid, a runtime holding the lock for a disk operation, or
// any other process is never signalled.
func (b *Box) lockHolder() *proc {
	path := b.path(shimapi.LockFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pid, ended, ok := shimapi.ParseLockContent(data)
	if !ok {
		return nil
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return nil
	}
	p := openProc(pid)
	if p == nil {
		return nil
	}
	if !flockedBy(pid, st.Ino) || !hasOpen(pid, st) || !runsShim(pid, b.path(shimapi.ConfigFile)) {
		p.close()
		return nil
	}
	p.ended = ended
	return p
}

// flockedBy reports whether /proc/locks shows pid holding an flock on inode ino.
func flockedBy(pid int, ino uint64) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:2f:5678 0 EOF"; waiters have "->" after the number.
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[4] != strconv.Itoa(pid) {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) == 3 && id[2] == strconv.FormatUint(ino, 10) {
			return true
		}
	}
	return false
}

// hasOpen reports whether pid has the file st open.
func hasOpen(pid int, st unix.Stat_t) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		var fst unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &fst) == nil && fst.Dev == st.Dev && fst.Ino == st.Ino {
			return true
		}
	}
	return false
}

// runsShim reports whether pid's command line is a shim's for config.
func runsShim(pid int, config string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	return len(args) == 2 && args[1] == config
}

// shimGrace is how long a shim has to stop on SIGTERM before SIGKILL: its
// VM's own stop timeout (a booting shim dies on SIGTERM at once) and a margin.
const shimGrace = 15 * time.Second

// endShim ends the shim p and waits until it and every process it started
// (its VMM, found before the first signal) have exited. A booting shim has
// no handler for SIGTERM yet and dies; its VMM, network stack and file
// daemons die with it (their parent-death signal), and are killed here if
// they have not within a few seconds. A shim past its boot stops its VM
// on SIGTERM as on a shutdown request.
func endShim(id string, p *proc) error {
	defer p.close()
	kids := descendants(p.pid)
	defer func() {
		for _, k := range kids {
			k.close()
		}
	}()
	if err := p.signal(syscall.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("box %s: end its shim (pid %d): %w", id, p.pid, err)
	}
	if !p.wait(shimGrace) {
		p.signal(syscall.SIGKILL)
		if !p.wait(5 * time.Second) {
			return errdefs.Errorf(errdefs.ErrTimeout, "box %s: its shim (pid %d) did not exit on SIGKILL", id, p.pid)
		}
	}
	var left []string
	for _, k := range kids {
		if !k.wait(5 * time.Second) {
			k.signal(syscall.SIGKILL)
			if !k.wait(5 * time.Second) {
				left = append(left, strconv.Itoa(k.pid))
			}
		}
	}
	if len(left) > 0 {
		return errdefs.Errorf(errdefs.ErrTimeout, "box %s: processes of its shim did not exit on SIGKILL: pids %s", id, strings.Join(left, ", "))
	}
	return nil
}

// endBootingShim ends the shim that holds the box's lock without serving it
// (a start under way or interrupted, in any process); true if there was one.
func (b *Box) endBootingShim() (bool, error) {
	p := b.lockHolder()
	if p == nil {
		return false, nil
	}
	if p.ended { // it stopped the box and is exiting: not ours to end
		p.wait(shimGrace)
		p.close()
		return false, nil
	}
	return true, endShim(b.rec.ID, p)
}

// noteEnded records why the box's run ended when its shim was ended before
// it could say (a shim killed while booting writes no exit record), so
// that info's last_exit and the next caller say why; a record the shim
// wrote is kept.
func (b *Box) noteEnded(why string) {
	if _, err := os.Lstat(b.path(shimapi.ExitFile)); err == nil {
		return
	}
	writeJSON(b.path(shimapi.ExitFile), shimapi.Exit{Reason: why, At: time.Now().UTC()})
}
