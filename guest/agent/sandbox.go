//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/seccomp"
)

// A Sandbox walls box processes off from the agent like a container. A
// sandbox init (the agent binary run again, see sandboxinit.go) is PID 1 of
// new PID, mount, IPC and UTS namespaces whose root is the box's own, with
// a /dev of harmless devices, its own /proc and a read-only /sys. One agent
// thread joins those namespaces, drops its capability bounding set to the
// policy's (protocol.DefaultCaps unless the box's options change it) and installs the box's seccomp filter on itself (no other thread
// of the agent is touched); every box process is forked from that thread,
// so it inherits all of it, yet stays the agent's child: the reaper waits
// for it, and signals and group kills use the agent's pids. The network
// namespace stays the agent's: the box's network is the VM's.
//
// Box processes cannot see the agent (another PID namespace), ptrace it,
// take its fds (pidfd_getfd: no pid to name, and refused), open its virtio
// port or the disks (not in the box's /dev; no CAP_MKNOD, mknod of devices
// refused), load modules, mount, or leave the root.
type Sandbox struct {
	root string // the box root in the agent's mount namespace
	logf func(string, ...any)
	prog []unix.SockFilter

	// policy is what the next sandbox started applies (SetPolicy).
	policy protocol.SandboxPolicy

	mu       sync.Mutex
	gen      *sandboxGen
	closed   bool
	hostname string // set by SetHostname; empty: the init's boxHostname
	// bootID and machineID: set by SetMachine (a fork); empty: the kernel's.
	bootID, machineID string
}

// SetMachine gives the live sandbox, and every one started after it, the
// boot id bootID (and the machine id, where the box has /etc/machine-id):
// see setMachineOf.
func (sb *Sandbox) SetMachine(bootID, machineID string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.bootID, sb.machineID = bootID, machineID
	if sb.gen == nil || sb.gen.down() {
		return nil // the next start sets it
	}
	if err := setMachineOf(sb.gen.initPid, bootID, machineID); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "identity: the sandbox's boot id: %v", err)
	}
	return nil
}

// SetHostname names the live sandbox and every one started after it.
func (sb *Sandbox) SetHostname(name string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.hostname = name
	if sb.gen == nil || sb.gen.down() {
		return nil // the next start names it
	}
	return setHostnameOf(sb.gen.initPid, name)
}

// sandboxGen is one sandbox init and the thread in its namespaces. If the
// init dies (its namespace then dies with every box process in it), the next
// exec starts a new one.
type sandboxGen struct {
	initPid int
	tid     int                    // the forking thread
	policy  protocol.SandboxPolicy // what its forking thread applied
	reqs    chan forkReq
	stop    chan struct{} // closed once the init died or the sandbox closed
	once    sync.Once
	exited  chan struct{} // closed when the forking thread's goroutine returned

	rootsMu sync.Mutex
	roots   map[string]bool // container roots readied in this sandbox (execroot.go)
}

type forkReq struct {
	argv0 string
	argv  []string
	attr  *syscall.ProcAttr
	done  chan forkResult
}

type forkResult struct {
	pid int
	err error
}

var errSandboxDown = errdefs.Errorf(errdefs.ErrInvalidState, "exec: the box's sandbox init has exited; retry to start a new one")

// sandboxReadyTimeout bounds the sandbox init's set-up (TCG is slow).
const sandboxReadyTimeout = 20 * time.Second

// StartSandbox starts the sandbox for the box root mounted at root (BoxRoot:
// the sandbox init builds the box's mounts there in its own namespace).
func StartSandbox(root string, logf func(string, ...any)) (*Sandbox, error) {
	prog, err := boxSeccomp()
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{root: root, logf: logf, prog: prog, policy: protocol.SandboxPolicy{Caps: protocol.DefaultCaps}}
	if sb.gen, err = sb.start(); err != nil {
		return nil, err
	}
	return sb, nil
}

// Describe says what walls box processes off, for the console.
func (sb *Sandbox) Describe() string {
	sb.mu.Lock()
	pid := 0
	if sb.gen != nil {
		pid = sb.gen.initPid
	}
	p := sb.policy
	sb.mu.Unlock()
	filter := fmt.Sprintf("seccomp filter of %d instructions", len(sb.prog))
	if p.NoSeccomp {
		filter = "no seccomp filter"
	}
	return fmt.Sprintf("sandbox: pid, mount, ipc, uts namespaces (init pid %d); capabilities %s; %s",
		pid, strings.Join(protocol.CapNames(p.Caps), ","), filter)
}

// SetPolicy makes p the policy of box processes: a live sandbox started
// under another one is ended (with its processes; the host sends this
// before it runs any) so that the next exec starts one under p.
func (sb *Sandbox) SetPolicy(p protocol.SandboxPolicy) error {
	if err := p.Check(); err != nil {
		return err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.policy = p
	if g := sb.gen; g != nil && !g.down() && g.policy != p {
		_ = unix.Kill(g.initPid, unix.SIGKILL)
		g.shut()
		sb.logf("sandbox: policy changed (capabilities %s, seccomp %v): restarting it", strings.Join(protocol.CapNames(p.Caps), ","), !p.NoSeccomp)
	}
	return nil
}

// current returns the live sandbox, starting a new one if the last init
// died. It must not be called with the reaper's lock held.
func (sb *Sandbox) current() (*sandboxGen, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "exec: the box is shutting down")
	}
	if sb.gen != nil && !sb.gen.down() {
		return sb.gen, nil
	}
	g, err := sb.start()
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "exec: restart the box's sandbox: %v", err)
	}
	sb.gen = g
	sb.logf("sandbox restarted: init pid %d", g.initPid)
	return g, nil
}

func (sb *Sandbox) start() (*sandboxGen, error) {
	g := newSandboxGen()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	rep, repW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	attr := &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), repW.Fd()},
		Sys:   &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS},
	}
	pid, err := getReaper().spawn(func() (int, error) {
		pid, err := syscall.ForkExec("/proc/self/exe", []string{sandboxInitArg0}, attr)
		g.initPid = pid // under the reaper's lock, before initExited can run
		return pid, err
	}, func(ws unix.WaitStatus) { sb.initExited(g, ws) })
	repW.Close()
	if err != nil {
		return nil, fmt.Errorf("start the sandbox init: %w", err)
	}
	fail := func(err error) (*sandboxGen, error) {
		if !g.down() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		g.shut()
		return nil, err
	}
	_ = rep.SetReadDeadline(time.Now().Add(sandboxReadyTimeout))
	msg, err := io.ReadAll(io.LimitReader(rep, 4096))
	switch {
	case err != nil:
		return fail(fmt.Errorf("sandbox init: %w", err))
	case len(msg) == 0:
		return fail(errors.New("sandbox init exited before it was ready"))
	case string(msg) != "ok":
		return fail(fmt.Errorf("sandbox init: %s", msg))
	}
	if sb.hostname != "" {
		if err := setHostnameOf(pid, sb.hostname); err != nil {
			return fail(fmt.Errorf("the sandbox's hostname: %w", err))
		}
	}
	if sb.bootID != "" {
		if err := setMachineOf(pid, sb.bootID, ""); err != nil { // the disk has the machine id already
			return fail(fmt.Errorf("the sandbox's boot id: %w", err))
		}
	}
	ready := make(chan error, 1)
	g.policy = sb.policy
	prog := sb.prog
	if g.policy.NoSeccomp {
		prog = nil
	}
	go g.forkThread(func() error { return enterSandbox(pid, g.policy.Caps, prog) }, ready)
	if err := <-ready; err != nil {
		return fail(fmt.Errorf("enter the sandbox: %w", err))
	}
	return g, nil
}

func (sb *Sandbox) initExited(g *sandboxGen, ws unix.WaitStatus) {
	g.shut()
	sb.mu.Lock()
	closed := sb.closed
	sb.mu.Unlock()
	if !closed {
		sb.logf("sandbox init (pid %d) ended (status %#x): its box processes were killed; the next exec starts a new sandbox", g.initPid, uint32(ws))
	}
}

// Close ends the sandbox: the init (with every box process) and the forking
// thread, and waits until the kernel has let go of the box's mount
// namespace, so that the box's disks can be unmounted cleanly.
func (sb *Sandbox) Close() {
	sb.mu.Lock()
	sb.closed = true
	g := sb.gen
	sb.mu.Unlock()
	if g == nil {
		return
	}
	if !g.down() {
		_ = unix.Kill(g.initPid, unix.SIGKILL)
	}
	if !g.end(2 * time.Second) {
		sb.logf("sandbox: forking thread %d did not end", g.tid)
	}
}

// end stops the forking thread and waits up to timeout until the kernel
// has ended it (and so released its namespaces).
func (g *sandboxGen) end(timeout time.Duration) bool {
	g.shut()
	<-g.exited
	task := "/proc/self/task/" + strconv.Itoa(g.tid)
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func newSandboxGen() *sandboxGen {
	return &sandboxGen{reqs: make(chan forkReq), stop: make(chan struct{}), exited: make(chan struct{})}
}

// root is the box's / as the agent reaches it: the sandbox init's root,
// with the box's own mounts.
func (g *sandboxGen) root() string { return "/proc/" + strconv.Itoa(g.initPid) + "/root" }

func (g *sandboxGen) shut() { g.once.Do(func() { close(g.stop) }) }

func (g *sandboxGen) down() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}

// forkExec runs syscall.ForkExec on the forking thread.
func (g *sandboxGen) forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	r := forkReq{argv0: argv0, argv: argv, attr: attr, done: make(chan forkResult, 1)}
	select {
	case g.reqs <- r:
	case <-g.stop:
		return 0, errSandboxDown
	}
	res := <-r.done
	return res.pid, res.err
}

// forkThread is the forking thread: it enters the sandbox (enter) and
// forks box processes until the sandbox stops. It never unlocks its OS thread, so
// the thread ends with the goroutine and no other goroutine ever runs on a
// thread in the box's namespaces. The Go runtime does not clone new threads
// from a locked thread (it hands that to its template thread), which
// matters here: a thread whose PID namespace for children differs from its
// own cannot create threads at all.
func (g *sandboxGen) forkThread(enter func() error, ready chan<- error) {
	lockOffMainThread()
	defer close(g.exited)
	g.tid = unix.Gettid()
	if err := enter(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case r := <-g.reqs:
			pid, err := syscall.ForkExec(r.argv0, r.argv, r.attr)
			r.done <- forkResult{pid, err}
		case <-g.stop:
			return
		}
	}
}

// enterSandbox moves the calling (locked) thread into the namespaces of
// the sandbox init pid (the PID namespace applies to its children), limits
// the capabilities its children can have to caps and installs the box's
// seccomp filter prog (none when empty) on it alone. It has CAP_SYS_ADMIN, so no no_new_privs is needed,
// and setuid programs keep working in the box.
func enterSandbox(pid int, caps uint64, prog []unix.SockFilter) error {
	nss := []struct {
		name string
		typ  int
	}{{"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS}, {"pid", unix.CLONE_NEWPID}, {"mnt", unix.CLONE_NEWNS}}
	fds := make([]int, 0, len(nss))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, ns := range nss {
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, ns.name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s namespace: %w", ns.name, err)
		}
		fds = append(fds, fd)
	}
	// A thread that shares its root and cwd with others cannot change its
	// mount namespace.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	for i, ns := range nss {
		if err := unix.Setns(fds[i], ns.typ); err != nil {
			return fmt.Errorf("join %s namespace: %w", ns.name, err)
		}
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := limitCaps(unix.RawSyscall6, caps); err != nil {
		return err
	}
	if len(prog) == 0 {
		return nil
	}
	return seccomp.Install(prog, 0)
}

// nsPid is the pid of the agent's child pid in the namespace it lives in:
// the last NSpid of its pidfd's fdinfo when pidfd is one (a few lines),
// else of its status (some fifty, with memory figures the kernel gathers
// for them: a sixth of an exec's cost in the agent under emulation). It runs
// once per exec: raw reads into one buffer, no os.File.
func nsPid(pid, pidfd int) (int, error) {
	file := "/proc/" + strconv.Itoa(pid) + "/status"
	if pidfd >= 0 {
		file = "/proc/self/fdinfo/" + strconv.Itoa(pidfd)
	}
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	var buf [4096]byte
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			break
		}
		n += k
	}
	for _, line := range bytes.Split(buf[:n], []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			if f := bytes.Fields(rest); len(f) > 0 {
				return strconv.Atoi(string(f[len(f)-1]))
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no NSpid in its status", pid)
}
