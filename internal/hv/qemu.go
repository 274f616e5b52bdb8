package hv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/jail"
)

// jailOverheadMiB is QEMU's own memory beyond guest RAM and the TCG
// translation cache, for the cgroup limit.
const jailOverheadMiB = 256

// jailPidsMax bounds QEMU's threads (vCPUs, I/O workers, RCU, ...).
const jailPidsMax = 1024

// VM is one running QEMU process. Its methods are safe for concurrent use.
type VM struct {
	proc process
	args []string
	out  *tail // QEMU's stdout and stderr
	qmp  net.Conn
	// console is Config.ConsoleLog, where a panicking guest says why.
	console string
	// channel is the host end of the agent port, nil without one.
	channel net.Conn
	network net.Conn // the host end of the NIC, nil without one
	done    chan struct{}
	err     error // set before done is closed
	werr    error // the process's wait result, set before done is closed

	qmpDone  chan struct{} // closed when nothing reads QMP any more
	killed   atomic.Bool
	mu       sync.Mutex
	panicked bool   // QMP GUEST_PANICKED seen
	shutdown string // reason of the QMP SHUTDOWN event
	nospace  string // the disk whose write found the host file system full

	ram       *RAM
	accel     Accel
	cmdMu     sync.Mutex    // one QMP command at a time (see command)
	cmdSeq    uint64        // the last command's number, under cmdMu
	pending   chan qmpReply // the running command's answer, under mu
	pendingID string        // and its id
}

// Start validates cfg, builds the QEMU command line and starts QEMU. It
// returns once QEMU has built the machine and answers on its monitor (about
// 60 ms); the guest then boots on its own. The VM is not tied to any context:
// it runs until the guest powers off or reboots, Kill is called, or the
// process that started it dies.
//
// Errors: a bad field of cfg wraps errdefs.ErrInvalidArgument and names the
// field (Config.Disks[1].Serial ...); a missing QEMU binary, kernel, initrd,
// disk, channel socket or console directory wraps errdefs.ErrNotFound; a QEMU
// that exits while starting wraps errdefs.ErrBootFailed and carries QEMU's
// own message; a QEMU that does not come up within 30 s is killed and the
// error wraps errdefs.ErrTimeout.
//
// Lifetime: QEMU runs in its own process group (a Ctrl-C meant for the caller
// does not reach it) with Pdeathsig SIGKILL. Linux sends Pdeathsig when the
// OS thread that forked the child exits, not when the process does, and Go
// ends a thread whenever a goroutine exits while locked to it
// (runtime.LockOSThread; cgo callbacks run on the C caller's thread). So Start
// never forks on the caller's thread: every QEMU is forked from one dedicated
// OS thread that is locked and lives as long as the process. QEMU therefore
// dies with the process that started it, and only then.
func Start(cfg Config) (*VM, error) {
	cfg, bin, tscKHz, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	// Everything QEMU touches on the host is handed over as a descriptor:
	// it never needs a path to a socket, a disk or the log.
	var fds fdList
	defer fds.closeChildEnds()
	var parentEnds []io.Closer // closed if Start fails
	fail := func(err error) (*VM, error) {
		for _, c := range parentEnds {
			c.Close()
		}
		return nil, err
	}
	qmp, qmpFD, err := fds.socketpair("qmp")
	if err != nil {
		return nil, err
	}
	parentEnds = append(parentEnds, qmp)
	var agent, console, network net.Conn
	agentFD, consoleFD, netFD := -1, -1, -1
	if cfg.Channel {
		if agent, agentFD, err = fds.socketpair("agent"); err != nil {
			return fail(err)
		}
		parentEnds = append(parentEnds, agent)
	}
	if cfg.NIC != nil && cfg.NIC.Tap != nil {
		if netFD, err = fds.dupConn("tap", cfg.NIC.Tap); err != nil {
			return fail(err)
		}
	} else if cfg.NIC != nil {
		if network, netFD, err = fds.messagePair("network"); err != nil {
			return fail(err)
		}
		parentEnds = append(parentEnds, network)
	}
	cfg.extraNetFDs = nil
	for _, n := range cfg.ExtraNICs {
		fd, err := fds.dupConn("tap", n.Tap)
		if err != nil {
			return fail(err)
		}
		cfg.extraNetFDs = append(cfg.extraNetFDs, fd)
	}
	var logw *consoleLog
	if cfg.ConsoleLog != "" {
		if logw, err = openConsoleLog(cfg.ConsoleLog); err != nil {
			return fail(err)
		}
		parentEnds = append(parentEnds, logw)
		if console, consoleFD, err = fds.socketpair("console"); err != nil {
			return fail(err)
		}
		parentEnds = append(parentEnds, console)
	}
	// QEMU opens an image read-only before it reopens it read-write, and
	// an fd set hands out only descriptors of the mode asked for: a
	// writable disk needs one of each (as libvirt passes them).
	diskFDs := make([][]int, len(cfg.Disks))
	for i, d := range cfg.Disks {
		modes := []bool{true}
		if !d.ReadOnly {
			modes = append(modes, false)
		}
		for _, ro := range modes {
			fd, err := fds.open(d.Path, ro)
			if err != nil {
				return fail(err)
			}
			diskFDs[i] = append(diskFDs[i], fd)
		}
	}

	fsFDs := make([]int, len(cfg.FS))
	for i, f := range cfg.FS {
		if fsFDs[i], err = fds.dupConn("fs "+f.Tag, f.Conn); err != nil {
			return fail(err)
		}
	}

	if cfg.RAM != nil {
		if cfg.ramFD, err = fds.dupConn("ram", cfg.RAM.File); err != nil {
			return fail(err)
		}
	}

	out := &tail{max: 64 << 10}
	args := append([]string{bin}, buildArgs(cfg, tscKHz, qmpFD, agentFD, consoleFD, netFD, diskFDs, fsFDs...)...)
	p, err := startProcess(cfg, bin, args, fds.files, out)
	fds.closeChildEnds()
	if err != nil {
		return fail(err)
	}
	vm := &VM{
		proc:    p,
		args:    args,
		out:     out,
		console: cfg.ConsoleLog,
		qmp:     qmp,
		channel: agent,
		network: network,
		done:    make(chan struct{}),
		qmpDone: make(chan struct{}),
		ram:     cfg.RAM,
		accel:   cfg.Accel,
	}
	if console != nil {
		go logw.copyFrom(console)
	}
	go vm.wait()

	dec, err := vm.handshake(startTimeout)
	if err != nil {
		close(vm.qmpDone)
		qmp.Close()
		if agent != nil {
			agent.Close()
		}
		if network != nil {
			network.Close()
		}
		return nil, vm.startFailed(err)
	}
	go vm.readEvents(dec)
	if cfg.Incoming != nil && cfg.CheckIncoming != nil {
		v, err := vm.Version()
		if err == nil {
			err = cfg.CheckIncoming(v)
		}
		if err != nil {
			vm.Kill()
			return nil, err
		}
	}
	if cfg.Incoming != nil {
		if err := vm.restore(cfg.Incoming, cfg.IncomingWithRAM, startTimeout); err != nil {
			vm.Kill()
			return nil, fmt.Errorf("%w (qemu: %s)", err, lastLines(vm.out.String(), 1024))
		}
	}
	return vm, nil
}

// Channel is the host end of the agent port (Config.Channel), nil without
// one. It reads EOF once QEMU has exited.
func (vm *VM) Channel() net.Conn { return vm.channel }

// Network is the host end of the guest's NIC (Config.NIC), nil without one:
// a SOCK_SEQPACKET socket carrying one Ethernet frame per message.
func (vm *VM) Network() net.Conn { return vm.network }

// Pid is QEMU's process id (and process group id).
func (vm *VM) Pid() int { return vm.proc.pid() }

// CPUTime is the CPU time QEMU has used so far (all its threads, user and
// system); 0 once it has exited or when /proc cannot tell.
func (vm *VM) CPUTime() time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(vm.Pid()) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks (USER_HZ, 100 on Linux).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// Confinement is what the jail gave QEMU (Config.Jail); the zero Layers
// without one.
func (vm *VM) Confinement() jail.Layers { return vm.proc.layers() }

// Args is QEMU's argv, the binary first; for logs and box info.
func (vm *VM) Args() []string { return append([]string(nil), vm.args...) }

// Done is closed when QEMU has exited and been reaped.
func (vm *VM) Done() <-chan struct{} { return vm.done }

// Err reports how QEMU ended, once Done is closed (nil before): nil when QEMU
// exited with status 0, which is also what a guest reboot, power-off, or a
// kernel panic without the guest's pvpanic driver give. After Kill it wraps
// errdefs.ErrClosed. Otherwise it wraps errdefs.ErrInternal and the
// *exec.ExitError, and carries QEMU's last output; a guest kernel panic
// reported through pvpanic (the guest loaded pvpanic and pvpanic-mmio) ends
// QEMU with status 1 and says so.
func (vm *VM) Err() error {
	select {
	case <-vm.done:
		return vm.err
	default:
		return nil
	}
}

// Kill sends SIGKILL to QEMU and waits until it has been reaped. It is
// idempotent and returns nil when QEMU has already exited.
func (vm *VM) Kill() error {
	select {
	case <-vm.done:
		return nil
	default:
	}
	vm.killed.Store(true)
	// os.Process signals through a pidfd, so this cannot hit a reused pid.
	if err := vm.proc.kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("hv: kill qemu (pid %d): %v: %w", vm.Pid(), err, errdefs.ErrInternal)
	}
	<-vm.done
	return nil
}

// wait reaps QEMU, lets the QMP reader take in the last events, then
// records the outcome and closes done.
func (vm *VM) wait() {
	vm.werr = vm.proc.wait()
	select {
	case <-vm.qmpDone:
	case <-time.After(2 * time.Second):
	}
	vm.err = vm.exitError(vm.werr)
	close(vm.done)
}

func (vm *VM) exitError(werr error) error {
	if werr == nil {
		return nil
	}
	if vm.killed.Load() {
		return fmt.Errorf("hv: qemu (pid %d) stopped by Kill: %w", vm.Pid(), errdefs.ErrClosed)
	}
	vm.mu.Lock()
	panicked, shutdown, nospace := vm.panicked, vm.shutdown, vm.nospace
	vm.mu.Unlock()
	msg := fmt.Sprintf("hv: qemu (pid %d) exited", vm.Pid())
	switch {
	case nospace != "":
		return fmt.Errorf("hv: the host file system holding writable disk %s is full: the VM was stopped at its first write that did not fit "+
			"(what the guest had not written yet is lost; its file system replays its journal on the next start): %w", nospace, errdefs.ErrLimit)
	case panicked:
		why := ""
		if line := panicLine(vm.console); line != "" {
			why = " (" + line + ")"
		}
		msg = "hv: the guest kernel panicked" + why + "; " + msg[len("hv: "):]
	case shutdown != "":
		msg += " after " + shutdown
	}
	if o := lastLines(vm.out.String(), 2048); o != "" {
		msg += ": " + o
	}
	return fmt.Errorf("%s: %w: %w", msg, werr, errdefs.ErrInternal)
}

var serialRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// forkThread runs functions on one OS thread that is locked and never
// exits, so that Pdeathsig (which Linux ties to the forking thread) fires
// only when the whole process dies.
var forkThread struct {
	once sync.Once
	reqs chan func()
}

func onForkThread(f func()) {
	forkThread.once.Do(func() {
		forkThread.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for f := range forkThread.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forkThread.reqs <- func() { defer close(done); f() }
	<-done
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(b)
}

// lastLines is the end of s, at most max bytes, cut at a line start, with
// lines joined by "; " so that it reads well inside an error.
func lastLines(s string, max int) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r", ""))
	if len(s) > max {
		s = s[len(s)-max:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.ToValidUTF8(strings.Join(lines, "; "), "\uFFFD")
}
