package hv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/jail"
	"github.com/boxlite/boxlite/protocol"
)

// Defaults and limits of Config.
const (
	DefaultQEMU      = "qemu-system-x86_64"
	DefaultMemoryMiB = 256
	DefaultCPUs      = 1
	MinMemoryMiB     = 32
	MaxCPUs          = 255
	// AgentPortName is the name of the virtio-serial port that carries
	// VM.Channel; the guest finds it at /sys/class/virtio-ports/vportNpM/name
	// and opens /dev/vportNpM (with one port on the only virtio-serial
	// device: /dev/vport0p1).
	AgentPortName = protocol.AgentPort
	// MaxSerialLen is the longest Disk.Serial: virtio-blk carries 20 bytes.
	MaxSerialLen = 20
	// maxCmdline is x86's COMMAND_LINE_SIZE minus the terminating NUL.
	maxCmdline = 2047
	// tbSizeMiB caps QEMU's TCG translation cache, which stays resident:
	// booting fills about 45 MiB of it and an idle box held 58 MiB with a
	// 256 MiB cap. At 32 MiB a boot costs the same QEMU CPU time (within
	// noise: 3.46 vs 3.43 s here); at 16 MiB retranslation cost 0.4-0.7 s.
	// QEMU's own default cap is 1 GiB of host memory per VM.
	tbSizeMiB = 32
	// startTimeout bounds how long QEMU may take to build the machine, from
	// fork to answering its first QMP command. It is normally about 60 ms.
	startTimeout = 30 * time.Second
	// netSocketBuf is each end's socket buffer for the NIC's frames.
	netSocketBuf = 1 << 20
)

// Disk is a raw disk image attached as a virtio-blk device.
type Disk struct {
	Path string
	// Serial identifies the disk in the guest at /sys/block/vdX/serial: at
	// most MaxSerialLen bytes of [A-Za-z0-9._-], unique within a Config, or
	// empty for none. Identify disks by serial, not by vdX name.
	Serial   string
	ReadOnly bool
}

// Config describes one VM. Zero fields take the defaults named on them.
type Config struct {
	// QEMU is the QEMU binary, looked up in PATH; default DefaultQEMU
	// ("qemu-system-x86_64").
	QEMU string
	// Kernel is the guest kernel: a bzImage, or an uncompressed vmlinux ELF
	// with a PVH note. Required.
	Kernel string
	// Initrd is the initramfs; optional.
	Initrd string
	// Cmdline is appended to the default kernel arguments
	// "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests
	// initcall_blacklist=crypto_kdf108_init" (plus tsc_early_khz=<host kHz>
	// under TCG, unless Cmdline sets it). Later arguments win, so
	// "loglevel=7" here undoes "quiet".
	Cmdline string
	// MemoryMiB is the guest RAM; default DefaultMemoryMiB (256).
	MemoryMiB int
	// CPUs is the number of vCPUs; default DefaultCPUs (1).
	CPUs int
	// Disks are attached in order. With QEMU 7.2 and a guest that loads
	// virtio_blk as a module, the first is vda, the second vdb, and so on;
	// still, identify disks by Serial.
	Disks []Disk
	// Channel gives the guest a virtio-serial port named AgentPortName
	// whose host end is VM.Channel (a socketpair: no path, nothing for
	// another process to connect to). Optional.
	Channel bool
	// ConsoleLog is the file the guest serial console (ttyS0) is appended
	// to, by Start's own goroutine (QEMU gets a socket, never the path),
	// capped at shimapi.ConsoleLogMax and rotated once; its directory must exist.
	// Optional (the console is discarded).
	ConsoleLog string
	// FS are virtio-fs devices (see FS); with any, guest RAM is a shared
	// memfd. Optional.
	FS []FS
	// Accel selects KVM or TCG; default (empty): DetectAccel.
	Accel Accel
	// NIC, when set, gives the guest a virtio-net device whose frames are
	// VM.Network, one Ethernet frame per message of a SOCK_SEQPACKET
	// socketpair (so a frame's size is the message's, never a length the
	// guest sends; unlike SOCK_DGRAM, the queue is bounded by bytes, not by
	// the host's net.unix.max_dgram_qlen, 10 here).
	// Default: no network device at all.
	NIC *NIC
	// Jail, when set, confines QEMU with package jail. Default: none.
	Jail *Jail
	// RAM, when set, is guest memory in the caller's file (see RAM), for
	// saving a VM (Shared) or starting one from a saved state (not Shared).
	// Default: QEMU's own anonymous memory (a memfd with FS).
	RAM *RAM
	// Incoming, when set, is a state VM.Save wrote: the VM starts from it
	// instead of booting, RAM holding the memory saved with it. Start
	// returns once it runs. Default: a boot.
	Incoming *os.File

	ramFD int // RAM.File as QEMU inherits it, set by Start
}

// NIC is the guest's network device.
type NIC struct {
	MAC string // e.g. "5a:94:ef:e4:0c:ee"
}

// Jail is how a VM's QEMU is confined: its own mount, IPC and network
// namespaces holding only QEMU's own files (under /usr) and, read-only, the
// kernel and initrd; the uid below when the caller is root; a cgroup with
// memory (guest RAM + TCG cache + jailOverheadMiB) and process limits;
// rlimits, no_new_privs and a seccomp filter under QEMU's own -sandbox.
// Everything else QEMU reaches is a descriptor Start hands it.
type Jail struct {
	UID, GID uint32 // the identity QEMU runs as when the caller is root (jail.AllocUID)
	Cgroup   string // the cgroup's name, unique per VM, e.g. "boxlite-<box id>"
	// Helper is a binary whose main calls jail.Main first; default: the
	// running executable.
	Helper string
}

// jailOverheadMiB is QEMU's own memory beyond guest RAM and the TCG
// translation cache, for the cgroup limit.
const jailOverheadMiB = 256

// jailPidsMax bounds QEMU's threads (vCPUs, I/O workers, RCU, ...).
const jailPidsMax = 1024

// Hypervisor starts VMs. QEMU is the only implementation; the seam is here
// so that a native KVM backend can be added where it can be tested.
type Hypervisor interface {
	Start(Config) (*VM, error)
}

// QEMU is the Hypervisor that runs each VM as a QEMU microvm process.
type QEMU struct{}

// Start is the package-level Start.
func (QEMU) Start(cfg Config) (*VM, error) { return Start(cfg) }

var _ Hypervisor = QEMU{}

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
	if cfg.NIC != nil {
		if network, netFD, err = fds.messagePair("network"); err != nil {
			return fail(err)
		}
		parentEnds = append(parentEnds, network)
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
	if cfg.Incoming != nil {
		if err := vm.restore(cfg.Incoming, startTimeout); err != nil {
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

// fdList collects the descriptors a QEMU child inherits: ExtraFiles[i] is
// fd 3+i in the child.
type fdList struct {
	files []*os.File // the child's ends
}

func (l *fdList) add(f *os.File) int {
	l.files = append(l.files, f)
	return 3 + len(l.files) - 1
}

// socketpair returns the parent's end as a net.Conn and the child's fd.
func (l *fdList) socketpair(name string) (net.Conn, int, error) {
	return l.pair(name, unix.SOCK_STREAM)
}

// messagePair is a socketpair of messages (SOCK_SEQPACKET), with buffers
// for bursts of network frames.
func (l *fdList) messagePair(name string) (net.Conn, int, error) {
	return l.pair(name, unix.SOCK_SEQPACKET)
}

func (l *fdList) pair(name string, typ int) (net.Conn, int, error) {
	p, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err == nil && typ == unix.SOCK_SEQPACKET {
		for _, fd := range p {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, netSocketBuf)
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, netSocketBuf)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("hv: start: %s socketpair: %v: %w", name, err, errdefs.ErrLimit)
	}
	parent := os.NewFile(uintptr(p[0]), name)
	c, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		unix.Close(p[1])
		return nil, 0, fmt.Errorf("hv: start: %s conn: %v: %w", name, err, errdefs.ErrInternal)
	}
	return c, l.add(os.NewFile(uintptr(p[1]), name)), nil
}

// open opens a disk image for QEMU, read-only or read-write.
func (l *fdList) open(path string, readOnly bool) (int, error) {
	flags := os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, fmt.Errorf("hv: open disk %s: %w", path, statKind(err))
	}
	return l.add(f), nil
}

func (l *fdList) closeChildEnds() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

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

// handshake waits for QEMU's QMP greeting and the answer to
// qmp_capabilities. QEMU only answers commands from its main loop, so an
// answer means every -device has been created; the greeting alone comes
// earlier.
func (vm *VM) handshake(timeout time.Duration) (*json.Decoder, error) {
	vm.qmp.SetDeadline(time.Now().Add(timeout))
	defer vm.qmp.SetDeadline(time.Time{})
	dec := json.NewDecoder(vm.qmp)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := dec.Decode(&greeting); err != nil {
		return nil, err
	}
	if greeting.QMP == nil {
		return nil, errors.New("no QMP greeting")
	}
	if _, err := io.WriteString(vm.qmp, `{"execute":"qmp_capabilities"}`+"\n"); err != nil {
		return nil, err
	}
	for {
		var m qmpMessage
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		switch {
		case m.Return != nil:
			return dec, nil
		case m.Error != nil:
			return nil, fmt.Errorf("qmp_capabilities: %s", m.Error.Desc)
		case m.Event != "":
			vm.event(m)
		}
	}
}

// startFailed turns a failed handshake into Start's error and makes sure
// QEMU is gone.
func (vm *VM) startFailed(herr error) error {
	var ne net.Error
	if errors.As(herr, &ne) && ne.Timeout() {
		vm.Kill()
		return fmt.Errorf("hv: start: qemu (pid %d) did not come up within %v: %w",
			vm.Pid(), startTimeout, errdefs.ErrTimeout)
	}
	// QEMU closed the monitor: it is exiting. Give it a moment to do so.
	select {
	case <-vm.done:
	case <-time.After(5 * time.Second):
		vm.Kill()
	}
	msg := lastLines(vm.out.String(), 2048)
	if msg == "" {
		msg = "no output"
	}
	status := herr.Error()
	if vm.werr != nil {
		status = vm.werr.Error()
	}
	return fmt.Errorf("hv: start: qemu failed (%s): %s: %w", status, msg, errdefs.ErrBootFailed)
}

type qmpMessage struct {
	ID     json.RawMessage `json:"id"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
}

// readEvents drains QMP until QEMU goes away, remembering what Err needs.
func (vm *VM) readEvents(dec *json.Decoder) {
	defer close(vm.qmpDone)
	defer vm.qmp.Close()
	for {
		var m qmpMessage
		if err := dec.Decode(&m); err != nil {
			return
		}
		if m.Event != "" {
			vm.event(m)
		} else {
			vm.reply(m)
		}
	}
}

func (vm *VM) event(m qmpMessage) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	switch m.Event {
	case "GUEST_PANICKED":
		vm.panicked = true
	case "SHUTDOWN":
		var d struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(m.Data, &d) == nil && d.Reason != "" {
			vm.shutdown = d.Reason
		}
	case "BLOCK_IO_ERROR":
		var d struct {
			Device  string `json:"device"`
			NoSpace bool   `json:"nospace"`
			Action  string `json:"action"`
		}
		if json.Unmarshal(m.Data, &d) == nil && d.NoSpace && d.Action == "stop" && vm.nospace == "" {
			// Paused for lack of host space: end it (vm.proc.kill, not
			// Kill, which would call it the caller's doing).
			vm.nospace = strings.ToValidUTF8(d.Device[:min(len(d.Device), 64)], "?") // QEMU is confined, not trusted
			go vm.proc.kill()
		}
	}
}

// prepare fills in defaults, validates cfg and finds what Start needs.
func prepare(cfg Config) (_ Config, bin string, tscKHz int, err error) {
	if cfg.QEMU == "" {
		cfg.QEMU = DefaultQEMU
	}
	if bin, err = exec.LookPath(cfg.QEMU); err != nil {
		kind := errdefs.ErrNotFound
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			kind = errdefs.ErrInvalidArgument
		}
		return cfg, "", 0, fmt.Errorf("hv: Config.QEMU %q: %v: %w", cfg.QEMU, err, kind)
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = DefaultMemoryMiB
	}
	if cfg.MemoryMiB < MinMemoryMiB {
		return cfg, "", 0, fmt.Errorf("hv: Config.MemoryMiB %d: want at least %d: %w",
			cfg.MemoryMiB, MinMemoryMiB, errdefs.ErrInvalidArgument)
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = DefaultCPUs
	}
	if cfg.NIC != nil {
		if hw, err := net.ParseMAC(cfg.NIC.MAC); err != nil || len(hw) != 6 {
			return cfg, "", 0, fmt.Errorf("hv: Config.NIC.MAC %q is not a MAC address: %w", cfg.NIC.MAC, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.CPUs < 1 || cfg.CPUs > MaxCPUs {
		return cfg, "", 0, fmt.Errorf("hv: Config.CPUs %d: want 1 to %d: %w",
			cfg.CPUs, MaxCPUs, errdefs.ErrInvalidArgument)
	}
	if cfg.Accel == "" {
		if cfg.Accel, _, err = DetectAccel(); err != nil {
			return cfg, "", 0, err
		}
	} else if cfg.Accel, err = ParseAccel(string(cfg.Accel)); err != nil {
		return cfg, "", 0, fmt.Errorf("hv: Config.Accel: %w", err)
	}
	if strings.ContainsAny(cfg.Cmdline, "\x00\n") {
		return cfg, "", 0, fmt.Errorf("hv: Config.Cmdline: contains NUL or newline: %w", errdefs.ErrInvalidArgument)
	}

	if cfg.Kernel == "" {
		return cfg, "", 0, fmt.Errorf("hv: Config.Kernel: required: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Kernel, err = regularFile("Config.Kernel", cfg.Kernel); err != nil {
		return cfg, "", 0, err
	}
	if cfg.Initrd != "" {
		if cfg.Initrd, err = regularFile("Config.Initrd", cfg.Initrd); err != nil {
			return cfg, "", 0, err
		}
	}
	disks := make([]Disk, len(cfg.Disks))
	serials := map[string]int{}
	for i, d := range cfg.Disks {
		field := fmt.Sprintf("Config.Disks[%d]", i)
		if d.Path == "" {
			return cfg, "", 0, fmt.Errorf("hv: %s.Path: required: %w", field, errdefs.ErrInvalidArgument)
		}
		if d.Path, err = regularFile(field+".Path", d.Path); err != nil {
			return cfg, "", 0, err
		}
		if d.Serial != "" {
			if len(d.Serial) > MaxSerialLen || !serialRE.MatchString(d.Serial) {
				return cfg, "", 0, fmt.Errorf("hv: %s.Serial %q: want 1 to %d bytes of [A-Za-z0-9._-]: %w",
					field, d.Serial, MaxSerialLen, errdefs.ErrInvalidArgument)
			}
			if j, dup := serials[d.Serial]; dup {
				return cfg, "", 0, fmt.Errorf("hv: %s.Serial %q: already used by Config.Disks[%d]: %w",
					field, d.Serial, j, errdefs.ErrInvalidArgument)
			}
			serials[d.Serial] = i
		}
		disks[i] = d
	}
	cfg.Disks = disks
	if err := checkFS(cfg.FS); err != nil {
		return cfg, "", 0, err
	}
	if err := checkRAM(cfg); err != nil {
		return cfg, "", 0, err
	}
	if cfg.ConsoleLog != "" {
		if cfg.ConsoleLog, err = filepath.Abs(cfg.ConsoleLog); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		if fi, err := os.Stat(cfg.ConsoleLog); err == nil && fi.IsDir() {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: is a directory: %w", cfg.ConsoleLog, errdefs.ErrInvalidArgument)
		}
		if fi, err := os.Stat(filepath.Dir(cfg.ConsoleLog)); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: directory: %w", cfg.ConsoleLog, statKind(err))
		} else if !fi.IsDir() {
			return cfg, "", 0, fmt.Errorf("hv: Config.ConsoleLog %q: parent is not a directory: %w", cfg.ConsoleLog, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.Accel == TCG && !strings.Contains(" "+cfg.Cmdline, " tsc_early_khz=") {
		if tscKHz, err = HostTSCkHz(); err != nil {
			return cfg, "", 0, fmt.Errorf("hv: tcg needs tsc_early_khz: %w", err)
		}
	}
	if n := len(kernelCmdline(cfg, tscKHz)); n > maxCmdline {
		return cfg, "", 0, fmt.Errorf("hv: Config.Cmdline: kernel command line is %d bytes, limit %d: %w",
			n, maxCmdline, errdefs.ErrInvalidArgument)
	}
	return cfg, bin, tscKHz, nil
}

var serialRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// regularFile makes path absolute and checks that it is an existing regular file.
func regularFile(field, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("hv: %s %q: %v: %w", field, path, err, errdefs.ErrInvalidArgument)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("hv: %s %q: %w", field, path, statKind(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("hv: %s %q: not a regular file: %w", field, path, errdefs.ErrInvalidArgument)
	}
	return abs, nil
}

func statKind(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.ErrNotFound
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
}

// kernelCmdline is the guest kernel command line: console on the serial
// port, quiet boot, a panic reboots at once and reboot=t resets by triple
// fault without trying ACPI or the (absent) keyboard controller first; QEMU
// runs with -no-reboot, so either way it exits. cryptomgr.notests skips the
// crypto self-tests the kernel runs as each algorithm registers: under TCG
// they took 0.5-0.9 s of every boot (QEMU CPU time 3.1-3.8 s -> 2.3-2.8 s);
// the algorithms stay, only their known-answer tests at boot go. The KDF's
// own test ignores that flag, and is all its initcall does (another 45 ms). Under TCG tsc_early_khz is
// required: microvm has no timer to calibrate the TSC against and the guest
// hangs about half of the time without it. tsc=reliable too: TCG's TSC
// follows the host clock, but the kernel's watchdog judges it against
// jiffies, whose ticks come late under emulation, marks it unstable about a
// second into boot and falls back to the jiffies clocksource (4 ms
// resolution; TCP sending from the box then ran at 1 MB/s).
func kernelCmdline(cfg Config, tscKHz int) string {
	s := "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests initcall_blacklist=crypto_kdf108_init"
	if tscKHz > 0 {
		s += " tsc_early_khz=" + strconv.Itoa(tscKHz) + " tsc=reliable"
	}
	if c := strings.TrimSpace(cfg.Cmdline); c != "" {
		s += " " + c
	}
	return s
}

// buildArgs is QEMU's command line for a prepared cfg (argv without argv[0]),
// with the descriptors QEMU inherits: QMP, the agent port and the console
// and the NIC (-1: none), those of each disk (read-only, then read-write if writable)
// and those of each Config.FS.
func buildArgs(cfg Config, tscKHz, qmpFD, agentFD, consoleFD, netFD int, diskFDs [][]int, fsFDs ...int) []string {
	// rtc=on: without the CMOS RTC the guest spends about 1.2 s more
	// booting (and has no wall clock). acpi=on: the guest finds the
	// virtio-mmio devices and the IOAPIC through ACPI; the Debian kernel
	// has neither virtio_mmio.device= support nor MP tables.
	machine := "microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=on"
	ram := ramArgs(cfg)
	if ram != nil {
		machine += ",memory-backend=mem"
	}
	a := []string{
		"-M", machine,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// seccomp: QEMU may not exec, setuid, or use obsolete syscalls.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
	}
	switch cfg.Accel {
	case KVM:
		a = append(a, "-accel", "kvm", "-cpu", "host")
	default:
		// qemu64 plus the x86-64-v2 extensions, so userlands built for
		// x86-64-v2 run; "-cpu max" would boot about 0.3 s slower.
		a = append(a, "-accel", "tcg,tb-size="+strconv.Itoa(tbSizeMiB),
			"-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16")
	}
	a = append(a, ram...)
	if cfg.Incoming != nil {
		a = append(a, "-incoming", "defer")
	}
	a = append(a,
		"-m", strconv.Itoa(cfg.MemoryMiB),
		"-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", cfg.Kernel,
	)
	if cfg.Initrd != "" {
		a = append(a, "-initrd", cfg.Initrd)
	}
	a = append(a, "-append", kernelCmdline(cfg, tscKHz))
	if consoleFD >= 0 {
		a = append(a, "-chardev", "socket,id=con,fd="+strconv.Itoa(consoleFD))
	} else {
		a = append(a, "-chardev", "null,id=con")
	}
	a = append(a,
		"-serial", "chardev:con",
		// A guest that loads pvpanic and pvpanic-mmio reports a kernel
		// panic; QEMU then exits with status 1 instead of 0.
		"-device", "pvpanic",
		"-action", "panic=exit-failure",
	)
	if agentFD >= 0 {
		a = append(a,
			"-device", "virtio-serial-device",
			"-chardev", "socket,id=agent,fd="+strconv.Itoa(agentFD),
			"-device", "virtserialport,chardev=agent,name="+AgentPortName,
		)
	}
	if netFD >= 0 {
		a = append(a,
			"-netdev", "dgram,id=net0,local.type=fd,local.str="+strconv.Itoa(netFD),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.NIC.MAC,
		)
	}
	for i, d := range cfg.Disks {
		// Each disk is an inherited descriptor in an fd set of its own.
		id, set := "d"+strconv.Itoa(i), strconv.Itoa(i+1)
		for _, fd := range diskFDs[i] {
			a = append(a, "-add-fd", "fd="+strconv.Itoa(fd)+",set="+set)
		}
		drive := "id=" + id + ",file=/dev/fdset/" + set + ",format=raw,if=none,cache=writeback"
		if d.ReadOnly {
			drive += ",readonly=on"
		} else {
			// A full host file system pauses the VM before the guest sees
			// an error (werror=enospc; the QMP event then ends the VM,
			// see event), so its ext4 stays consistent: reported to the
			// guest, the error aborts the journal and leaves writers stuck
			// on dirty pages that can never be written back. Other I/O
			// errors are the guest's to see.
			drive += ",readonly=off,discard=unmap,werror=enospc,rerror=report"
		}
		dev := "virtio-blk-device,drive=" + id
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		a = append(a, "-drive", drive, "-device", dev)
	}
	a = append(a, fsArgs(cfg.FS, fsFDs)...)
	if cfg.RAM == nil {
		// The guest hands the pages it frees back to the host (free page
		// reporting): booting touches more RAM than an idle box keeps.
		// Last, so the other devices keep their guest names. Not with
		// RAM: QEMU 7.2 discards a file's pages by punching holes in the
		// file, which a sealed template refuses (and which would take
		// the pages from every VM mapping it), never from a private
		// mapping; a VM saved with the device is restored with it.
		a = append(a, "-device", "virtio-balloon-device,free-page-reporting=on")
	}
	return append(a,
		"-chardev", "socket,id=qmp,fd="+strconv.Itoa(qmpFD),
		"-mon", "chardev=qmp,mode=control",
	)
}

// optEscape escapes a value inside a QEMU option string: commas are doubled.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

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
