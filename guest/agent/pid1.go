//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// PortName is the virtio-serial port the host serves the protocol on.
const PortName = protocol.AgentPort

// Boot deadlines: generous for TCG, where a device can take a while.
const (
	portTimeout = 20 * time.Second
	diskTimeout = 10 * time.Second
)

// consoleLogf writes one line to the console (the agent's stderr, which the
// kernel opened on /dev/console); the host keeps the console as the box log.
func consoleLogf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "boxlite-agent: %s\n", strings.TrimRight(msg, "\n"))
}

func boottimeMs() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e6
}

func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}

// shieldSignals keeps stray signals from killing PID 1: the Go runtime would
// exit on SIGTERM and friends, and a kernel whose init exits panics. They are
// caught (not ignored, which children would inherit) and dropped.
func shieldSignals() {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
		unix.SIGBUS, unix.SIGFPE, unix.SIGUSR1, unix.SIGSEGV, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM,
		unix.SIGTERM, unix.SIGSTKFLT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU, unix.SIGXFSZ,
		unix.SIGVTALRM, unix.SIGPWR, unix.SIGSYS)
	go func() {
		for sig := range ch {
			consoleLogf("ignoring signal %v", sig)
		}
	}()
}

// Main is the agent as PID 1: it sets the guest up, serves the host and
// powers the VM off when asked. It never returns.
func Main() {
	if isSandboxInit() {
		sandboxInitMain() // never returns
	}
	startMs := boottimeMs()
	defer func() {
		// A PID 1 that returns or panics takes the kernel down without a word.
		r := recover()
		consoleLogf("fatal: %v\n%s", r, debug.Stack())
		powerOff()
	}()
	shieldSignals()
	getReaper()
	logf := consoleLogf

	if err := mountBase(); err != nil {
		bootFailed(nil, fmt.Errorf("mount /dev, /proc, /sys: %w", err), nil)
	}
	if err := mountCgroups(); err != nil {
		logf("cgroups: %v", err) // the box works, its containers without limits
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if _, err := loadModules(ModulesDir, string(cmdline)); err != nil {
		// Tell the host too if the channel's driver made it.
		var port *os.File
		if _, serr := os.Stat("/sys/module/virtio_console"); serr == nil {
			port, _ = openPort(PortName, portTimeout)
		}
		bootFailed(port, err, nil)
	}
	if err := tunePageReporting(pageReportingParam); err != nil {
		logf("free page reporting: %v", err) // the box works, keeping more host memory
	}
	modulesMs := boottimeMs()
	type portResult struct {
		f   *os.File
		err error
	}
	portCh := make(chan portResult, 1)
	go func() {
		f, err := openPort(PortName, portTimeout)
		portCh <- portResult{f, err}
	}()
	_ = unix.Sethostname([]byte("boxlite"))
	if err := loopbackUp(); err != nil {
		logf("lo: %v", err)
	}
	// The NIC comes up while the disks mount.
	netc, err := parseNetConfig(string(cmdline))
	netCh := make(chan error, 1)
	if netc != nil {
		go func() { netCh <- netc.up() }()
	} else {
		netCh <- nil
	}
	var b *box
	var lane *laneDev
	if err == nil {
		var disks map[string]string
		if disks, err = findDisks(diskTimeout); err == nil {
			b, err = setupBox(disks, logf)
		}
		if node, ok := disks[protocol.LaneSerial]; ok && err == nil {
			var lerr error // without the lane copies take the channel
			if lane, lerr = openLane(node); lerr != nil {
				logf("%v; copies use the channel", lerr)
			}
		}
	}
	if err == nil && netc != nil && b.Root != "" {
		err = netc.bindNetFiles(b)
	}
	if nerr := <-netCh; err == nil && nerr != nil {
		err = fmt.Errorf("network: %w", nerr)
	}
	if err == nil {
		var vols []volume
		if vols, err = parseVolumes(string(cmdline)); err == nil {
			err = b.mountVolumes(vols)
		}
	}
	mountedMs := boottimeMs()
	// Box processes only ever run in the sandbox: a box root without one
	// fails the boot.
	var sb *Sandbox
	if err == nil && b.Root != "" {
		if sb, err = StartSandbox(b.Root, logf); err != nil {
			err = fmt.Errorf("box sandbox: %w", err)
		}
	}
	sandboxMs := boottimeMs()
	port := <-portCh
	if err == nil && port.err != nil {
		err = port.err
	}
	if err != nil {
		if sb != nil {
			sb.Close()
		}
		bootFailed(port.f, err, b)
	}

	cfg := Config{
		Root:    b.Root,
		Sandbox: sb,
		Logf:    logf,
		Lane:    lane,
		Hello: protocol.Hello{
			Version:      protocol.Version,
			Agent:        "boxlite-agent/" + Version,
			Kernel:       kernelVersion(),
			KernelMs:     startMs,
			Layers:       b.Layers,
			WritableDisk: b.Writable,
		},
	}
	if b.Layers == 0 {
		cfg.Root = "/"
		cfg.RootErr = errdefs.Errorf(errdefs.ErrInvalidState, "exec: the box has no root file system (no layer disks)")
	}
	cfg.Hello.ReadyMs = boottimeMs()
	logf("ready at %.0f ms: agent started %.0f, modules loaded %.0f, disks mounted %.0f, sandbox started %.0f; %d layers, writable disk: %v",
		cfg.Hello.ReadyMs, startMs, modulesMs, mountedMs, sandboxMs, b.Layers, b.Writable)
	if sb != nil {
		logf("%s", sb.Describe())
	}
	for {
		err := Serve(port.f, cfg)
		if errors.Is(err, ErrShutdown) {
			shutdown(b, sb, logf)
		}
		logf("channel: %v; serving again", err)
		time.Sleep(200 * time.Millisecond)
		cfg.Hello.ReadyMs = boottimeMs()
	}
}

// bootFailed says why on the console and, when the channel is up, to the
// host, then powers off.
func bootFailed(port *os.File, err error, b *box) {
	consoleLogf("boot failed: %v", err)
	if port != nil {
		if werr := SendError(port, errdefs.Errorf(errdefs.ErrBootFailed, "guest: %v", err)); werr != nil {
			consoleLogf("could not tell the host: %v", werr)
		}
		time.Sleep(100 * time.Millisecond) // let QEMU take the frame before the VM goes
	}
	if b != nil {
		b.unmount(consoleLogf)
	}
	powerOff()
}

// shutdown kills every process, unmounts the disks cleanly and powers off.
func shutdown(b *box, sb *Sandbox, logf func(string, ...any)) {
	if sb != nil {
		sb.Close() // its init, with every box process, and its thread
	}
	_ = unix.Kill(-1, unix.SIGKILL) // everything but PID 1
	// Until all are reaped: the box's mount namespace, which holds the
	// disks, goes with the last of them.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err == unix.ECHILD {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	unix.Sync()
	if b != nil {
		b.unmount(logf)
	}
	powerOff()
}

// powerOff ends the VM. QEMU microvm exits on an ACPI power-off, and on a
// reboot when run with -no-reboot (the fallback). It never returns.
func powerOff() {
	unix.Sync()
	err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	consoleLogf("power off: %v; rebooting", err)
	err = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	consoleLogf("reboot: %v", err)
	for {
		time.Sleep(time.Hour)
	}
}

// loopbackUp brings lo up, as every box expects localhost to work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
