package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/jail"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Run boots the VM and serves clients until the box stops. ready receives one
// JSON Ready line; parent, when not nil, is a pipe whose EOF means the process
// that created the box has died, which stops the box.
func Run(cfg shimapi.Config, ready io.WriteCloser, parent io.Reader) error {
	s := &shim{cfg: cfg, routes: map[uint32]route{}, next: 1, clients: map[*client]bool{}}
	defer func() {
		s.stopNetwork()
		s.stopVolumes()
		if s.releaseUID != nil {
			s.releaseUID()
		}
		if s.releaseRAM != nil {
			s.releaseRAM()
		}
		if s.lane != "" {
			os.Remove(s.lane)
		}
	}()
	err := s.boot()
	if err != nil {
		running := errors.Is(err, errLocked)
		writeReady(ready, shimapi.Ready{Kind: string(errdefs.KindOf(err)), Error: err.Error(), Running: running,
			StateRefused: errors.Is(err, errStateRefused)})
		if !running { // otherwise the exit record is the running shim's
			s.writeExit("boot failed: "+err.Error(), false)
		}
		return err
	}
	writeReady(ready, shimapi.Ready{Info: &s.info})
	// The boot's buffers (template copies, the jails' set-up) are garbage
	// now: give the memory back while the box idles.
	debug.FreeOSMemory()
	orphaned := make(chan struct{})
	if parent != nil {
		go func() {
			why := parentGone(parent)
			close(orphaned)
			s.stop(why)
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() { sig := <-sigs; s.stop("shim received " + sig.String()) }()
	go s.serveAgent()
	s.startCPUSamples()
	go s.accept()
	go s.watchIdle()
	s.startHealth()
	<-s.vm.Done()
	s.teardown()
	s.mu.Lock()
	paused := s.reason == pausedReason && !s.fault
	s.mu.Unlock()
	if paused {
		return nil // a paused box is kept, whoever created it
	}
	// Nobody is left to remove an auto-remove box that ended because its
	// creator died, or a detached one that ended on its own.
	s.mu.Lock()
	autoRemove := s.cfg.AutoRemove // a hand-over may have changed it
	s.mu.Unlock()
	select {
	case <-orphaned:
		if autoRemove {
			os.RemoveAll(cfg.Dir)
		}
	default:
		if autoRemove && parent == nil {
			os.RemoveAll(cfg.Dir)
		}
	}
	return nil
}

// parentGone waits for the parent-death pipe to end and says why the box
// stops: the creator exited, or it disconnected for the reason it wrote
// (a protocol violation it caught; the first 256 bytes, printable only).
func parentGone(parent io.Reader) string {
	var why []byte
	buf := make([]byte, 512)
	for {
		n, err := parent.Read(buf)
		if room := 256 - len(why); room > 0 {
			why = append(why, buf[:min(n, room)]...)
		}
		if err != nil {
			break
		}
	}
	text := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(string(why), ""))
	if text == "" {
		return "the process that created the box exited"
	}
	return "the runtime that created the box disconnected: " + text
}

// tmpfsWarning warns of a box directory in memory: the box's disk pages
// are then charged to its VMM's memory cgroup, and a box that fills its
// disk has its VMM killed for memory (measured: "VMM exited unexpectedly:
// signal: killed") instead of seeing a full disk.
func tmpfsWarning(dir string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		return ""
	}
	return "disk: the box's home is on tmpfs: its disk is memory charged to its VMM, and filling it kills the box; put BOXLITE_HOME on a disk"
}

// errLocked: another shim runs the box.
var errLocked = errdefs.Errorf(errdefs.ErrAlreadyExists, "box locked")

type shim struct {
	cfg         shimapi.Config
	vmcfg       hv.Config
	releaseUID  func()   // the VMM's uid, when the shim allocated one
	lock        *os.File // the box's lock (shimapi.LockFile)
	lane        string   // the lane file, once made (removed at exit)
	releaseRAM  func()   // the template memory the VM maps (template.go); nil without
	startNote   string   // why a box that could start from a template booted
	vm          *hv.VM
	agent       net.Conn
	agentReader *protocol.Reader
	aw          sync.Mutex // serialises writes to agent
	w           *protocol.Writer
	ln          net.Listener
	info        protocol.Info
	net         *netProc   // the box's network stack (network.go); nil without one
	podTap      *os.File   // the NIC's tap in a pod's network namespace (network.go)
	podTaps     []*os.File // the further NICs' taps there
	netInfo     *protocol.NetworkInfo
	netWarnings []string    // what the network stack's jail could not give
	trustCA     string      // the box's secrets CA (PEM) that the agent installs; "" without secrets
	fsDaemons   []*fsDaemon // virtiofsd of the volumes (volumes.go)
	fsWarnings  []string    // what the file daemons' jails could not give
	counters    counters    // the box's metrics (metrics.go)
	health      *health     // the box's health check (health.go); nil without; set under mu
	// resumedHealth: the saved state this box resumed from, when it holds
	// a health state to go on from (set before startHealth).
	resumedHealth *shimapi.Paused

	mu       sync.Mutex
	routes   map[uint32]route // agent stream id -> client stream
	next     uint32
	clients  map[*client]bool
	reason   string // why the box is stopping; first one wins
	fault    bool   // the box ended because something failed (see shimapi.Exit)
	stopping bool
	pausing  bool // a pause is saving the VM (pause.go)
	// lastActive is the box's last activity, for auto-pause (idle.go).
	lastActive time.Time
	// control receives the agent's next stream-0 frame while a hand-over
	// waits for its answer (handover.go); nil otherwise.
	control chan protocol.Frame
}

type route struct {
	c     *client
	local uint32
	flow  *flow
	// detachable: the stream is a detachable exec's (auto-pause, idle.go).
	detachable bool
}

func writeReady(w io.WriteCloser, r shimapi.Ready) {
	b, _ := json.Marshal(r)
	w.Write(append(b, '\n'))
	w.Close()
}

// TCGWarning is in the info of every box that runs under TCG.
const TCGWarning = "tcg: the guest runs on QEMU's software emulator, which QEMU does not treat as a security boundary; " +
	"use a host with KVM for untrusted code (BOXLITE_ACCEL=kvm refuses TCG)"

// vmConfig decides how the box's VM is built: accelerator, disks (by the
// serials the agent looks for: layer0.. bottom first, then rw), channel and
// console.
func (s *shim) vmConfig() (hv.Config, string, error) {
	c := s.cfg
	var accel hv.Accel
	var reason string
	var err error
	if c.Accel != "" {
		if accel, err = hv.ParseAccel(c.Accel); err != nil {
			return hv.Config{}, "", err
		}
		reason = string(accel) + ": chosen by the runtime"
	} else if accel, reason, err = hv.DetectAccel(); err != nil {
		return hv.Config{}, "", err
	}
	if c.RequireKVM && accel != hv.KVM {
		return hv.Config{}, "", errdefs.Errorf(errdefs.ErrUnsupported,
			"box %s: KVM is required (TCG is not a security boundary), but this host gives %s", c.BoxID, reason)
	}
	vm := hv.Config{QEMU: c.QEMU, Kernel: c.Kernel, Initrd: c.Initrd, MemoryMiB: c.MemoryMiB, CPUs: c.CPUs,
		Channel: true, ConsoleLog: c.Path(shimapi.ConsoleFile), Accel: accel, Cmdline: strings.Join(c.KernelArgs, " ")}
	for i, l := range c.Layers {
		vm.Disks = append(vm.Disks, hv.Disk{Path: l, Serial: protocol.LayerSerial(i), ReadOnly: true})
	}
	vm.Disks = append(vm.Disks, hv.Disk{Path: c.Path(shimapi.DiskFile), Serial: protocol.WritableSerial})
	if err := s.makeLane(); err != nil {
		return hv.Config{}, "", err
	}
	vm.Disks = append(vm.Disks, hv.Disk{Path: s.lane, Serial: protocol.LaneSerial})
	if !c.NoJail {
		vm.Jail = &hv.Jail{Cgroup: shimapi.CgroupPrefix(c.BoxID)}
	}
	return vm, reason, nil
}

// makeLane makes the box's lane (shimapi.LaneFile) empty for this VM; the
// shim removes it when it exits. Only the box's shim (holding its lock)
// calls this.
func (s *shim) makeLane() error {
	path := s.cfg.Path(shimapi.LaneFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("box %s: lane: %w", s.cfg.BoxID, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("box %s: lane: %w", s.cfg.BoxID, err)
	}
	s.lane = path
	err = f.Truncate(shimapi.LaneSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("box %s: lane: %w", s.cfg.BoxID, err)
	}
	return nil
}

// jailUID gives the box's VMM a uid of its own when the shim runs as root,
// held (by a lock file under jail.HostUIDDir, host-wide: no other box of
// any home gets it) until the shim exits. A non-root
// caller's VMM keeps the caller's uid, inside a user namespace.
func (s *shim) jailUID(j *hv.Jail) error {
	if j == nil || os.Geteuid() != 0 {
		return nil
	}
	uid, release, err := jail.AllocUID(jail.HostUIDDir, jail.UIDRangeLo, jail.UIDRangeHi)
	if err != nil {
		return fmt.Errorf("box %s: a uid for its VMM: %w", s.cfg.BoxID, err)
	}
	j.UID, j.GID = uid, uid
	s.releaseUID = release
	return nil
}

// lockBox takes the box's lock for the shim's life (released when the
// process exits, however it exits).
func (s *shim) lockBox() error {
	f, err := os.OpenFile(s.cfg.Path(shimapi.LockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("box %s is already running or starting (another shim holds %s): %w", s.cfg.BoxID, shimapi.LockFile, errLocked)
	}
	s.lock = f // kept open: the lock lives as long as the shim
	// Before anything else, say who holds it: a box whose start is under
	// way has no socket yet, and the runtime's stop and remove find its
	// shim by this pid (checked against the lock's holder before any
	// signal: shimapi.LockFile).
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("box %s: %s: %w", s.cfg.BoxID, shimapi.LockFile, err)
	}
	if _, err := f.WriteAt(shimapi.LockContent(os.Getpid(), false), 0); err != nil {
		return fmt.Errorf("box %s: %s: %w", s.cfg.BoxID, shimapi.LockFile, err)
	}
	return nil
}

func (s *shim) boot() error {
	if err := s.lockBox(); err != nil {
		return err
	}
	vmcfg, reason, err := s.vmConfig()
	if err != nil {
		return err
	}
	if err := s.startNetwork(&vmcfg); err != nil {
		return err
	}
	if err := s.jailUID(vmcfg.Jail); err != nil {
		return err
	}
	fss, words, err := s.startVolumes()
	if err != nil {
		s.stopVolumes()
		return err
	}
	vmcfg.FS = fss
	if words != "" {
		vmcfg.Cmdline = strings.TrimSpace(vmcfg.Cmdline + " " + words)
	}
	s.vmcfg = vmcfg
	os.Truncate(vmcfg.ConsoleLog, 0)
	os.Remove(vmcfg.ConsoleLog + ".1")
	sweepSaves(s.cfg.Dir)
	start := time.Now()
	h, r, how, err := s.startVM(vmcfg, start)
	if err != nil {
		return err
	}
	fail := func(what string, err error) error {
		s.stopVolumes()
		return s.bootFailed(s.vm, vmcfg.ConsoleLog, what, start, err)
	}
	h.Bound()
	s.agentReader = r
	s.info = protocol.Info{Hello: h, Accel: string(vmcfg.Accel), AccelReason: reason,
		ShimPid: os.Getpid(), VMMPid: s.vm.Pid(), BootMs: float64(time.Since(start).Microseconds()) / 1000,
		Start: how, StartNote: s.startNote, StartedAtMs: time.Now().UnixMilli()}
	s.info.Network = s.netInfo
	if vmcfg.Accel == hv.TCG {
		s.info.Warnings = append(s.info.Warnings, TCGWarning)
	}
	if s.net != nil && !h.Has(protocol.FeatureNetwork) {
		s.info.Warnings = append(s.info.Warnings, "guest: the agent does not bring the box's network up (an older agent)")
	}
	if h.Layers > 0 && !h.Has(protocol.FeatureSandbox) {
		s.info.Warnings = append(s.info.Warnings, "guest: the agent runs box processes without its sandbox (an older agent): they can reach the agent's channel")
	}
	if s.cfg.NoJail {
		s.info.Warnings = append(s.info.Warnings, "vmm confinement: off (security jailer_enabled=false): the VMM runs as a plain child of the shim")
	} else {
		for _, l := range s.vm.Confinement().Missing() {
			s.info.Warnings = append(s.info.Warnings, fmt.Sprintf("vmm confinement: no %s (%s)", l.Name, l.Note))
		}
	}
	if p := s.cfg.Sandbox; p != nil && p.NoSeccomp {
		s.info.Warnings = append(s.info.Warnings, "guest: box processes run without the box's seccomp filter (security seccomp_enabled=false)")
	}
	s.info.Warnings = append(s.info.Warnings, s.fsWarnings...)
	s.info.Warnings = append(s.info.Warnings, s.netWarnings...)
	if w := tmpfsWarning(s.cfg.Dir); w != "" {
		s.info.Warnings = append(s.info.Warnings, w)
	}
	if len(s.info.Warnings) > 0 {
		log.Printf("isolation warnings: %q", s.info.Warnings)
	}
	if s.ln, err = listenUnix(s.cfg.Path(shimapi.SocketFile)); err != nil {
		return fail("listen for clients", err)
	}
	return nil
}

// awaitFrame reads the agent's next frame during the boot. The boot is judged by the CPU
// time its VMM used, not by the wall clock alone: with many boxes booting on
// few cores, a guest can take minutes of wall time to use the seconds of CPU
// its boot needs, and it is not stuck; a guest that spins its budget away
// without a hello is.
func (s *shim) awaitFrame(vm *hv.VM, r *protocol.Reader, start time.Time) (protocol.Frame, error) {
	type result struct {
		f   protocol.Frame
		err error
	}
	got := make(chan result, 1)
	go func() { f, err := r.ReadFrame(); got <- result{f, err} }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	budget, wallMax := s.cfg.BootTimeout, s.cfg.BootTimeout*shimapi.BootWallFactor
	for {
		select {
		case res := <-got:
			return res.f, res.err
		case <-tick.C:
			cpu, wall := vm.CPUTime(), time.Since(start)
			if cpu < budget && wall < wallMax {
				continue
			}
			vm.Kill() // the reader then sees the channel end
			<-got
			return protocol.Frame{}, errdefs.Errorf(errdefs.ErrTimeout, "the VMM used %.1fs of CPU in %.1fs (the boot's budget: %s of CPU, %s of wall time)",
				cpu.Seconds(), wall.Seconds(), budget, wallMax)
		}
	}
}

// exitedSoon reports whether the VMM exits within a moment, to tell a dead
// VM from a silent agent.
func exitedSoon(vm *hv.VM) bool {
	select {
	case <-vm.Done():
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

func listenUnix(path string) (net.Listener, error) {
	if len(path) >= 108 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "socket path %q is longer than 107 bytes (use a shorter BOXLITE_HOME)", path)
	}
	os.Remove(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil { // the umask left it open to others
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// stop asks the agent to power off, and kills the VMM if it has not exited
// by StopTimeout.
func (s *shim) stop(reason string) {
	// A pause under way ends the box, or fails and leaves it running:
	// then it stops.
	for deadline := time.Now().Add(pauseSaveTimeout + time.Minute); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		pausing := s.pausing
		s.mu.Unlock()
		if !pausing || time.Now().After(deadline) {
			break
		}
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	if s.reason == "" {
		s.reason = reason
	}
	s.mu.Unlock()
	log.Printf("stopping: %s", reason)
	s.sendAgent(protocol.Frame{Type: protocol.TShutdown})
	select {
	case <-s.vm.Done():
	case <-time.After(s.cfg.StopTimeout):
		log.Printf("VMM did not exit within %s; killing it", s.cfg.StopTimeout)
		s.vm.Kill()
	}
}

// kill ends the box at once for reason (the first reason wins), without
// asking the agent: used when the agent itself is the problem.
func (s *shim) kill(reason string) {
	s.mu.Lock()
	if s.reason == "" {
		s.reason, s.fault = reason, true
	}
	s.stopping = true
	s.mu.Unlock()
	log.Printf("killing the VM: %s", reason)
	s.vm.Kill()
}

func (s *shim) teardown() {
	s.mu.Lock()
	reason, fault := s.reason, s.fault
	if reason == "" {
		reason, fault = fmt.Sprintf("VMM exited unexpectedly: %v", s.vm.Err()), true
	}
	clients := s.clients
	s.clients = map[*client]bool{}
	s.mu.Unlock()
	s.writeExit(reason, fault)
	if s.lock != nil { // from here the box reads as stopped, not starting
		s.lock.Truncate(0)
		s.lock.WriteAt(shimapi.LockContent(os.Getpid(), true), 0)
	}
	s.stopNetwork() // its published ports are free again
	s.stopVolumes()
	s.ln.Close()
	os.Remove(s.cfg.Path(shimapi.SocketFile))
	for c := range clients {
		c.close()
	}
	s.agent.Close()
	log.Printf("box ended: %s", reason)
}

func (s *shim) writeExit(reason string, fault bool) {
	b, _ := json.Marshal(shimapi.Exit{Reason: reason, Fault: fault, At: time.Now().UTC()})
	path := s.cfg.Path(shimapi.ExitFile)
	if os.WriteFile(path+".tmp", b, 0o600) == nil {
		os.Rename(path+".tmp", path)
	}
}

func (s *shim) sendAgent(f protocol.Frame) error {
	s.aw.Lock()
	defer s.aw.Unlock()
	return s.w.WriteFrame(f)
}
