package shim

import (
	"fmt"
	"log"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// serveAgent routes agent frames to the client stream that owns them. Data is
// bounded by each stream's window, so a client's queue stays bounded too.
// Every frame is checked first (see police.go): a broken frame, a window
// overrun, forged credit or a flood of stray frames stops the box.
func (s *shim) serveAgent() {
	stray := 0
	for {
		f, err := s.agentReader.ReadFrame()
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			// The channel ends when the VMM does: then teardown says why.
			if !stopping && !exitedSoon(s.vm) {
				s.kill(fmt.Sprintf("agent channel failed: %v", err))
			}
			return
		}
		s.mu.Lock()
		r, ok := s.routes[f.Stream]
		if ok {
			err = r.flow.fromAgent(f)
			if !r.c.internal {
				s.touch()
			}
		}
		if ok && err == nil && f.Type.Last() {
			delete(s.routes, f.Stream)
			delete(r.c.streams, r.local)
		}
		s.mu.Unlock()
		if err != nil {
			s.violation(fmt.Errorf("stream %d: %w", f.Stream, err))
			return
		}
		if !ok && s.controlFrame(f) {
			continue
		}
		if !ok {
			if stray++; stray == 1 || stray == maxStrayFrames {
				log.Printf("agent: %s frame on stream %d, which is not open (%d so far)", f.Type, f.Stream, stray)
			}
			if stray >= maxStrayFrames {
				s.violation(fmt.Errorf("%d frames on streams that are not open", stray))
				return
			}
			continue
		}
		f.Stream = r.local
		r.c.queue(f)
	}
}

func (s *shim) accept() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		if err := s.checkPeer(nc); err != nil {
			log.Printf("refused a client: %v", err)
			nc.Close()
			continue
		}
		c := &client{conn: nc, w: protocol.NewWriter(nc), streams: map[uint32]uint32{}}
		c.cond = sync.NewCond(&c.mu)
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.clients[c] = true
		s.mu.Unlock()
		go c.writeLoop()
		go s.serveClient(c)
	}
}

// checkPeer lets in only the box's owner and root (SO_PEERCRED). The socket
// sits in a 0700 directory already; this holds even if that is loosened.
func (s *shim) checkPeer(nc net.Conn) error {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != s.cfg.OwnerUID {
		return fmt.Errorf("peer pid %d runs as uid %d; the box belongs to uid %d", cred.Pid, cred.Uid, s.cfg.OwnerUID)
	}
	return nil
}

// serveClient forwards a client's frames to the agent under shim-wide stream
// ids. When the client goes away, its running execs are cancelled.
func (s *shim) serveClient(c *client) {
	r := protocol.NewReader(c.conn)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			break
		}
		switch f.Type {
		case protocol.TInfo:
			reply, _ := protocol.Encode(protocol.TInfo, f.Stream, s.currentInfo())
			c.queue(reply)
			continue
		case protocol.TShutdown:
			go s.stop("stopped by a client")
			continue
		case protocol.TPause:
			go s.pause(c, f.Stream)
			continue
		case protocol.TFork:
			var req protocol.ForkSave
			if len(f.Payload) > 0 {
				if err := protocol.Decode(f, &req); err != nil {
					c.queueError(f.Stream, err)
					continue
				}
			}
			go s.fork(c, f.Stream, req)
			continue
		case protocol.TNetwork:
			go s.updateNetwork(c, f.Stream, f)
			continue
		case protocol.THold:
			s.hold(c, f)
			continue
		case protocol.THandOver:
			go s.handOver(c, f.Stream, f)
			continue
		}
		s.mu.Lock()
		global, ok := c.streams[f.Stream]
		if f.Type == protocol.TExec || f.Type == protocol.TAttach || f.Type == protocol.TCopyIn || f.Type == protocol.TCopyOut || f.Type == protocol.TTunnel || f.Type == protocol.TWatch || f.Type == protocol.TReleaseRoot || f.Type == protocol.TRootUsage ||
			f.Type == protocol.TRootCgroup || f.Type == protocol.TRootOOM {
			if s.pausing { // no new stream into a VM being saved: its stream would end with the save
				s.mu.Unlock()
				s.counters.refused(f.Type)
				c.queueError(f.Stream, errdefs.Errorf(errdefs.ErrInvalidState, "box %s is pausing", s.cfg.BoxID))
				continue
			}
			if ok {
				s.mu.Unlock()
				s.counters.refused(f.Type)
				c.queueError(f.Stream, errdefs.Errorf(errdefs.ErrAlreadyExists, "stream %d is in use", f.Stream))
				continue
			}
			global, ok = s.next, true
			s.next++
			c.streams[f.Stream] = global
			fl := s.newFlow(f.Type)
			if c.internal {
				fl = &flow{kind: f.Type, m: &counters{}}
			}
			s.routes[global] = route{c: c, local: f.Stream, flow: fl}
		}
		if ok {
			if r, open := s.routes[global]; open {
				r.flow.fromClient(f)
				if !c.internal {
					s.noteClientFrame(f, global, r)
				}
			}
		}
		if ok && f.Type == protocol.TCancel { // the agent sends nothing more on it
			delete(c.streams, f.Stream)
			delete(s.routes, global)
		}
		s.mu.Unlock()
		if !ok {
			continue // a late frame for a stream that has ended
		}
		f.Stream = global
		if err := s.sendAgent(f); err != nil {
			log.Printf("agent channel: %v", err)
		}
	}
	s.mu.Lock()
	delete(s.clients, c)
	var orphans []uint32
	for _, global := range c.streams {
		delete(s.routes, global)
		orphans = append(orphans, global)
	}
	s.mu.Unlock()
	for _, global := range orphans {
		s.sendAgent(protocol.Frame{Type: protocol.TCancel, Stream: global})
	}
	c.close()
}

// client is one host connection. Frames to it go through a queue and one
// writer goroutine so a slow client never stalls the agent channel.
type client struct {
	conn    net.Conn
	w       *protocol.Writer
	streams map[uint32]uint32 // client stream id -> agent stream id; guarded by shim.mu
	held    bool              // the client holds the box awake (THold); guarded by shim.mu
	// internal: the shim's own client (the health check, health.go): its
	// streams are no activity and not in the box's metrics.
	internal bool

	mu     sync.Mutex
	cond   *sync.Cond
	q      []protocol.Frame
	closed bool
}

func (c *client) queue(f protocol.Frame) {
	c.mu.Lock()
	if !c.closed {
		c.q = append(c.q, f)
	}
	c.mu.Unlock()
	c.cond.Signal()
}

func (c *client) queueError(stream uint32, err error) {
	f, _ := protocol.Encode(protocol.TError, stream, protocol.ErrorOf(err))
	c.queue(f)
}

func (c *client) writeLoop() {
	for {
		c.mu.Lock()
		for len(c.q) == 0 && !c.closed {
			c.cond.Wait()
		}
		q := c.q
		c.q = nil
		closed := c.closed
		c.mu.Unlock()
		for _, f := range q {
			if c.w.WriteFrame(f) != nil {
				c.close()
				return
			}
		}
		if closed {
			c.conn.Close()
			return
		}
	}
}

// close flushes what is queued, then closes the connection.
func (c *client) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cond.Signal()
}
