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
	"sync"
	"syscall"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/hv"
	"github.com/boxlite/boxlite/protocol"
)

// Config is what the runtime hands the shim, as JSON, for one box start.
type Config struct {
	Socket      string        // where host clients connect
	VM          hv.Config     // VM.Channel is the agent socket the shim listens on
	AccelReason string        // why VM.Accel was chosen, for info
	BootTimeout time.Duration // VMM start to agent hello
	StopTimeout time.Duration // shutdown request to VMM exit, then kill
	ExitFile    string        // the shim writes why the box ended here
	// RemoveDir, when set (auto-remove boxes), is deleted after the box ends
	// because its creator died: nobody is left to remove it.
	RemoveDir string
}

// Ready is the shim's one message to its parent on the ready pipe: the box's
// info once the agent said hello, or why the box failed to boot.
type Ready struct {
	Info  *protocol.Info `json:"info,omitempty"`
	Kind  string         `json:"kind,omitempty"`
	Error string         `json:"error,omitempty"`
}

// Exit records why a box ended, for the next client that asks.
type Exit struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Run boots the VM and serves clients until the box stops. ready receives one
// JSON Ready line; parent, when not nil, is a pipe whose EOF means the process
// that created the box has died, which stops the box.
func Run(cfg Config, ready io.WriteCloser, parent io.Reader) error {
	s := &shim{cfg: cfg, routes: map[uint32]route{}, next: 1, clients: map[*client]bool{}}
	err := s.boot()
	if err != nil {
		writeReady(ready, Ready{Kind: string(errdefs.KindOf(err)), Error: err.Error()})
		s.writeExit("boot failed: " + err.Error())
		return err
	}
	writeReady(ready, Ready{Info: &s.info})
	orphaned := make(chan struct{})
	if parent != nil {
		go func() {
			io.Copy(io.Discard, parent)
			close(orphaned)
			s.stop("the process that created the box exited")
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() { sig := <-sigs; s.stop("shim received " + sig.String()) }()
	go s.serveAgent()
	go s.accept()
	<-s.vm.Done()
	s.teardown()
	select {
	case <-orphaned:
		if cfg.RemoveDir != "" {
			os.RemoveAll(cfg.RemoveDir)
		}
	default:
	}
	return nil
}

type shim struct {
	cfg         Config
	vm          *hv.VM
	agent       net.Conn
	agentReader *protocol.Reader
	aw          sync.Mutex // serialises writes to agent
	w           *protocol.Writer
	ln          net.Listener
	info        protocol.Info

	mu       sync.Mutex
	routes   map[uint32]route // agent stream id -> client stream
	next     uint32
	clients  map[*client]bool
	reason   string // why the box is stopping; first one wins
	stopping bool
}

type route struct {
	c     *client
	local uint32
}

func writeReady(w io.WriteCloser, r Ready) {
	b, _ := json.Marshal(r)
	w.Write(append(b, '\n'))
	w.Close()
}

func (s *shim) boot() error {
	agentLn, err := listenUnix(s.cfg.VM.Channel)
	if err != nil {
		return err
	}
	defer agentLn.Close()
	start := time.Now()
	if s.vm, err = hv.Start(s.cfg.VM); err != nil {
		return err
	}
	deadline := start.Add(s.cfg.BootTimeout)
	fail := func(what string, err error) error {
		s.vm.Kill()
		return fmt.Errorf("boot: %s after %.1fs: %v: %w\n--- console (last lines) ---\n%s",
			what, time.Since(start).Seconds(), err, errdefs.ErrBootFailed, hv.ConsoleTail(s.cfg.VM.ConsoleLog, 2048))
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	agentLn.(*net.UnixListener).SetDeadline(deadline)
	go func() { c, err := agentLn.Accept(); ch <- accepted{c, err} }()
	var a accepted
	select {
	case a = <-ch:
	case <-s.vm.Done():
		return fail("VMM exited", fmt.Errorf("%v", s.vm.Err()))
	}
	if a.err != nil {
		return fail("VMM did not connect the agent channel", a.err)
	}
	s.agent = a.c
	s.w = protocol.NewWriter(a.c)
	a.c.SetReadDeadline(deadline)
	r := protocol.NewReader(a.c)
	f, err := r.ReadFrame()
	if err != nil {
		if s.exitedSoon() {
			err = fmt.Errorf("VMM exited: %v", s.vm.Err())
		}
		return fail("no hello from the guest agent", err)
	}
	if f.Type == protocol.TError {
		var e protocol.Error
		protocol.Decode(f, &e)
		return fail("guest agent failed", errors.New(e.Message))
	}
	var h protocol.Hello
	if f.Type != protocol.THello {
		return fail("guest agent protocol", fmt.Errorf("first frame is %s, not hello", f.Type))
	}
	if err := protocol.Decode(f, &h); err != nil {
		return fail("guest agent protocol", err)
	}
	if h.Version != protocol.Version {
		return fail("guest agent protocol", fmt.Errorf("agent speaks version %d, host %d", h.Version, protocol.Version))
	}
	a.c.SetReadDeadline(time.Time{})
	s.agentReader = r
	s.info = protocol.Info{Hello: h, Accel: string(s.cfg.VM.Accel), AccelReason: s.cfg.AccelReason,
		ShimPid: os.Getpid(), VMMPid: s.vm.Pid(), BootMs: float64(time.Since(start).Microseconds()) / 1000}
	if s.ln, err = listenUnix(s.cfg.Socket); err != nil {
		return fail("listen for clients", err)
	}
	return nil
}

// exitedSoon reports whether the VMM exits within a moment, to tell a dead
// VM from a silent agent.
func (s *shim) exitedSoon() bool {
	select {
	case <-s.vm.Done():
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
	return net.Listen("unix", path)
}

// stop asks the agent to power off, and kills the VMM if it has not exited
// by StopTimeout.
func (s *shim) stop(reason string) {
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

func (s *shim) teardown() {
	s.mu.Lock()
	reason := s.reason
	if reason == "" {
		reason = fmt.Sprintf("VMM exited unexpectedly: %v", s.vm.Err())
	}
	clients := s.clients
	s.clients = map[*client]bool{}
	s.mu.Unlock()
	s.writeExit(reason)
	s.ln.Close()
	os.Remove(s.cfg.Socket)
	os.Remove(s.cfg.VM.Channel)
	for c := range clients {
		c.close()
	}
	s.agent.Close()
	log.Printf("box ended: %s", reason)
}

func (s *shim) writeExit(reason string) {
	if s.cfg.ExitFile == "" {
		return
	}
	b, _ := json.Marshal(Exit{Reason: reason, At: time.Now().UTC()})
	tmp := s.cfg.ExitFile + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, s.cfg.ExitFile)
	}
}

func (s *shim) sendAgent(f protocol.Frame) error {
	s.aw.Lock()
	defer s.aw.Unlock()
	return s.w.WriteFrame(f)
}
