//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Version names the agent build; set with -ldflags "-X github.com/boxlite/boxlite/guest/agent.Version=...".
var Version = "dev"

// features are what this agent adds to protocol version 1 (Hello.Features).
var features = []string{protocol.FeatureTTY, protocol.FeatureNetwork, protocol.FeatureCopy, protocol.FeatureIdentity, protocol.FeaturePark, protocol.FeatureSignalGroup, protocol.FeatureExecDetach, protocol.FeatureClock, protocol.FeatureTrustCA, protocol.FeatureTunnel, protocol.FeatureWatch, protocol.FeatureExecRoot, protocol.FeatureExecRlimits, protocol.FeatureRootUsage, protocol.FeatureSandboxPolicy}

// DefaultMaxExecs caps the execs one connection may run at once.
const DefaultMaxExecs = 1024

// ErrShutdown is returned by Serve after the host asked the guest to shut down
// (all processes have been killed by then).
var ErrShutdown = errors.New("agent: shutdown requested by the host")

// Config is what Serve serves.
type Config struct {
	// Root is the box's root directory. Without a Sandbox (tests,
	// development), Root only prefixes paths and scopes /etc/passwd lookups,
	// and processes keep the agent's credentials unless the exec names a user.
	Root string
	// Sandbox, when set, runs every process in the box's sandbox (its
	// namespaces, with Root as /), as root unless the exec names a user.
	Sandbox *Sandbox
	// RootErr, when set, fails every exec with it: the box has no root file system.
	RootErr error
	// Hello is sent on stream 0 before anything else.
	Hello protocol.Hello
	// Logf logs one concise line; nil discards.
	Logf func(format string, args ...any)
	// MaxExecs caps concurrent execs; 0 means DefaultMaxExecs.
	MaxExecs int
	// Lane, when set, is the lane disk copies may ask for (FeatureLane).
	Lane *laneDev
}

type server struct {
	cfg     Config
	r       *protocol.Reader
	devNull *os.File
	reaper  *reaper

	wmu  sync.Mutex // serialises frames; also orders execution.over
	w    *protocol.Writer
	werr error

	mu     sync.Mutex
	execs  map[uint32]*execution
	copies map[uint32]*copyOp
	// tunnels are the open tunnel streams (tunnel.go).
	tunnels map[uint32]*tunnelOp
	parked  []parkedExec // park.go
	// detached holds the detachable execs by id (detach.go), attached or
	// not, running or ended and kept; finished those ended and kept,
	// oldest first.
	detached map[string]*execution
	finished []*execution
}

// Serve sends cfg.Hello on rw, then serves requests until rw fails or the host
// sends TShutdown (ErrShutdown). Every process it started is killed before it
// returns. It may be called again on the same channel after it returns.
func Serve(rw io.ReadWriter, cfg Config) error {
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.MaxExecs <= 0 {
		cfg.MaxExecs = DefaultMaxExecs
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	cfg.Hello.Features = append(cfg.Hello.Features[:len(cfg.Hello.Features):len(cfg.Hello.Features)], features...)
	if cfg.Sandbox != nil {
		cfg.Hello.Features = append(cfg.Hello.Features, protocol.FeatureSandbox)
		if haveCgroups() {
			cfg.Hello.Features = append(cfg.Hello.Features, protocol.FeatureRootCgroup)
		}
	}
	if cfg.Lane != nil {
		cfg.Hello.Features = append(cfg.Hello.Features, protocol.FeatureLane, protocol.FeatureExecLane)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer devNull.Close()
	s := &server{
		cfg:     cfg,
		r:       protocol.NewReader(rw),
		w:       protocol.NewWriter(rw),
		devNull: devNull,
		reaper:  getReaper(),
		execs:   make(map[uint32]*execution),
		copies:  make(map[uint32]*copyOp),
		tunnels: make(map[uint32]*tunnelOp),

		detached: make(map[string]*execution),
	}
	defer s.cancelAll()
	hello, err := protocol.Encode(protocol.THello, 0, cfg.Hello)
	if err != nil {
		return err
	}
	if err := s.write(hello); err != nil {
		return fmt.Errorf("agent: send hello: %w", err)
	}
	for {
		f, err := s.r.ReadFrame()
		if err != nil {
			return err
		}
		if s.handle(f) {
			return ErrShutdown
		}
	}
}

// SendError writes one Error frame on stream 0: how a guest that failed to
// boot tells the host why, instead of a Hello.
func SendError(w io.Writer, err error) error {
	f, e := protocol.Encode(protocol.TError, 0, protocol.ErrorOf(err))
	if e != nil {
		return e
	}
	return protocol.NewWriter(w).WriteFrame(f)
}

func (s *server) write(f protocol.Frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeLocked(f)
}

func (s *server) writeLocked(f protocol.Frame) error {
	if s.werr != nil {
		return s.werr
	}
	return s.wrote(s.w.WriteFrame(f))
}

// writeFramesLocked writes frames in one write (protocol.Writer.WriteFrames).
func (s *server) writeFramesLocked(fs ...protocol.Frame) error {
	if s.werr != nil {
		return s.werr
	}
	return s.wrote(s.w.WriteFrames(fs...))
}

// writeHeadedLocked writes a frame whose payload is b[HeaderSize:] (see
// protocol.Writer.WriteHeaded).
func (s *server) writeHeadedLocked(t protocol.Type, stream uint32, b []byte) error {
	if s.werr != nil {
		return s.werr
	}
	return s.wrote(s.w.WriteHeaded(t, stream, b))
}

// wrote records the first failed write: the channel is then unusable.
func (s *server) wrote(err error) error {
	if err != nil {
		s.werr = err
		s.cfg.Logf("channel write failed: %v", err)
	}
	return err
}

// sendError ends a stream that has no live exec with an Error frame.
func (s *server) sendError(stream uint32, err error) {
	f, e := protocol.Encode(protocol.TError, stream, protocol.ErrorOf(err))
	if e != nil {
		s.cfg.Logf("encode error frame: %v", e)
		return
	}
	_ = s.write(f)
}

// failStream ends stream with err, killing its exec if it has one.
func (s *server) failStream(stream uint32, err error) {
	if e := s.lookup(stream); e != nil {
		e.fail(err)
		return
	}
	if c := s.lookupCopy(stream); c != nil {
		c.end(filecopy.Stats{}, err)
		return
	}
	if t := s.lookupTunnel(stream); t != nil {
		t.fail(err)
		return
	}
	s.sendError(stream, err)
}

func (s *server) lookup(stream uint32) *execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[stream]
}

func (s *server) remove(e *execution) {
	s.wmu.Lock() // e.id changes under it (attach)
	id := e.id
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs[id] == e {
		delete(s.execs, id)
	}
}

func (s *server) cancelAll() {
	s.dropParked()
	s.mu.Lock()
	all := make([]*execution, 0, len(s.execs))
	for _, e := range s.execs {
		all = append(all, e)
	}
	for _, e := range s.detached {
		if !slices.Contains(all, e) {
			all = append(all, e)
		}
	}
	s.finished = nil
	copies := make([]*copyOp, 0, len(s.copies))
	for _, c := range s.copies {
		copies = append(copies, c)
	}
	tunnels := make([]*tunnelOp, 0, len(s.tunnels))
	for _, t := range s.tunnels {
		tunnels = append(tunnels, t)
	}
	s.mu.Unlock()
	for _, t := range tunnels {
		t.cancel()
	}
	for _, e := range all {
		e.terminate()
	}
	for _, c := range copies {
		c.cancel()
	}
}

// handle serves one frame; it reports whether the host asked for shutdown.
// A panic is contained to the frame's stream.
func (s *server) handle(f protocol.Frame) (shutdown bool) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logf("panic serving %s frame on stream %d: %v\n%s", f.Type, f.Stream, r, debug.Stack())
			s.failStream(f.Stream, errdefs.Errorf(errdefs.ErrInternal, "agent: %s frame: panic: %v", f.Type, r))
			shutdown = false
		}
	}()
	switch f.Type {
	case protocol.TExec:
		s.startExec(f)
	case protocol.TCopyIn, protocol.TCopyOut:
		s.startCopy(f)
	case protocol.TWatch:
		s.startWatch(f)
	case protocol.TReleaseRoot:
		s.releaseRoot(f)
	case protocol.TRootUsage:
		s.rootUsage(f)
	case protocol.TRootCgroup:
		s.rootCgroup(f)
	case protocol.TRootOOM:
		s.startRootOOM(f)
	case protocol.TIdentity:
		s.applyIdentity(f)
	case protocol.TClock:
		s.applyClock(f)
	case protocol.TPark:
		s.park(f)
	case protocol.TAttach:
		s.startAttach(f)
	case protocol.TTunnel:
		s.startTunnel(f)
	case protocol.TShutdown:
		if f.Stream != 0 {
			s.failStream(f.Stream, errdefs.Errorf(errdefs.ErrInvalidArgument, "shutdown frame on stream %d: it belongs on stream 0", f.Stream))
			return false
		}
		s.cfg.Logf("shutdown requested")
		return true
	case protocol.TStdin, protocol.TStdinClose, protocol.TSignal, protocol.TCancel, protocol.TCredit, protocol.TResize,
		protocol.TLane, protocol.TLaneFree, protocol.TLaneGrant:
		if c := s.lookupCopy(f.Stream); c != nil {
			c.frame(f)
			return false
		}
		if t := s.lookupTunnel(f.Stream); t != nil {
			t.frame(f)
			return false
		}
		e := s.lookup(f.Stream)
		if e == nil {
			// Late frames for a stream that just ended race with its last
			// frame; they are not errors.
			return false
		}
		s.streamFrame(e, f)
	default:
		s.failStream(f.Stream, errdefs.Errorf(errdefs.ErrUnsupported, "agent %s: frame type %s", Version, f.Type))
	}
	return false
}

func (s *server) streamFrame(e *execution, f protocol.Frame) {
	switch f.Type {
	case protocol.TStdin:
		e.onStdin(f.Payload)
	case protocol.TStdinClose:
		e.onStdinClose()
	case protocol.TCancel:
		e.cancel()
	case protocol.TSignal:
		var sig protocol.Signal
		if err := protocol.Decode(f, &sig); err != nil {
			e.fail(err)
			return
		}
		if sig.Signal < 1 || sig.Signal > 64 {
			e.fail(errdefs.Errorf(errdefs.ErrInvalidArgument, "signal %d: not a signal number (1-64)", sig.Signal))
			return
		}
		e.signal(sig.Signal, sig.Group)
	case protocol.TCredit:
		var c protocol.Credit
		if err := protocol.Decode(f, &c); err != nil {
			e.fail(err)
			return
		}
		e.credit(c.Fd, c.Bytes)
	case protocol.TLaneGrant:
		e.onLaneGrant(f)
	case protocol.TLaneFree:
		e.onLaneFree(f)
	case protocol.TResize:
		var r protocol.Resize
		err := protocol.Decode(f, &r)
		if err == nil {
			err = e.resize(r.Rows, r.Cols)
		}
		if err != nil {
			e.fail(err)
		}
	}
}

func (s *server) startExec(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec on stream 0: execs need a stream id of their own"))
		return
	}
	var req protocol.Exec
	if err := protocol.Decode(f, &req); err != nil {
		s.failStream(id, err)
		return
	}
	if old := s.lookup(id); old != nil {
		// The host lost track of its streams; end the old one too, so that an
		// Error is always the last frame of a stream.
		old.fail(errdefs.Errorf(errdefs.ErrAlreadyExists, "exec on stream %d: the stream is in use", id))
		return
	}
	s.mu.Lock()
	n := len(s.execs)
	s.mu.Unlock()
	if n >= s.cfg.MaxExecs {
		s.sendError(id, errdefs.Errorf(errdefs.ErrLimit, "exec: %d execs are running, the limit", n))
		return
	}
	if req.Detach != "" {
		if err := protocol.CheckDetachID("exec", req.Detach); err != nil {
			s.sendError(id, err)
			return
		}
		s.mu.Lock()
		_, dup := s.detached[req.Detach]
		s.mu.Unlock()
		if dup {
			s.sendError(id, errdefs.Errorf(errdefs.ErrAlreadyExists, "exec: a detachable exec %s exists already", req.Detach))
			return
		}
	}
	e := s.adopt(id, req)
	if e == nil {
		var err error
		if e, err = s.spawn(id, req); err != nil {
			s.sendError(id, err)
			return
		}
	}
	if req.Detach != "" {
		if err := s.register(e, req.Detach); err != nil {
			e.abort()
			s.sendError(id, err)
			return
		}
	}
	s.mu.Lock()
	s.execs[id] = e
	s.mu.Unlock()
	e.run()
}
