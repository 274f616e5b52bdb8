//go:build linux

package agent

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// maxCopies caps the copies one connection may run at once.
const maxCopies = 64

// copyOp is one copy stream. A copy in reads the host's tar stream from
// TStdin frames (at most a window of them queued) and credits each back as
// it is consumed; a copy out writes its tar stream as TStdout frames within
// the window the host credits. The file work resolves every path inside
// the box's root as the box sees it (the sandbox's root, its mounts), the
// box's symlinks as after chroot, and never follows one below the copy's
// destination (see filecopy).
type copyOp struct {
	s  *server
	id uint32

	mu     sync.Mutex
	cond   *sync.Cond
	q      [][]byte // copy in: data not yet read
	qlen   int
	closed bool  // copy in: the host sent TStdinClose
	win    int64 // copy out: bytes the host lets us send
	err    error // set when the copy must stop: Read and Write return it
	// over is set, under s.wmu, once the last frame is written or the host
	// has cancelled; no frame of the stream is written after it.
	over bool

	// With the lane (slots > 0), the data is in the lane's first slots,
	// taken in order round the ring: next is the count of chunks so far.
	in     bool // a copy in
	slots  int
	next   int
	chunks []protocol.LaneChunk // copy in: announced, not yet read
	free   int                  // copy out: slots the host has freed
	// Owned by the copy's goroutine: the lane, its slot buffer, the copy
	// in's unread data, the copy out's bytes in buf.
	lane *laneDev
	buf  []byte
	cur  []byte
	fill int
	// A copy out's chunks are written by a goroutine of their own (jobs),
	// while the next fills one of the spare buffers.
	jobs  chan laneJob
	spare chan []byte
	wdone chan struct{}
}

type laneJob struct {
	buf []byte
	n   int
	off int64
}

func (s *server) lookupCopy(id uint32) *copyOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copies[id]
}

func (s *server) startCopy(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s on stream 0: copies need a stream id of their own", f.Type))
		return
	}
	var in protocol.CopyIn
	var out protocol.CopyOut
	var err error
	if f.Type == protocol.TCopyIn {
		if err = protocol.Decode(f, &in); err == nil {
			err = validateCopyIn(in)
		}
	} else if err = protocol.Decode(f, &out); err == nil {
		err = checkBoxPath("copy out: source", out.Src)
	}
	if err == nil && s.cfg.RootErr != nil {
		err = s.cfg.RootErr
	}
	if err != nil {
		s.sendError(id, err)
		return
	}
	c := &copyOp{s: s, id: id, win: protocol.InitialWindow, in: f.Type == protocol.TCopyIn, slots: max(in.Lane, out.Lane)}
	c.free = c.slots
	c.cond = sync.NewCond(&c.mu)
	if err := s.addCopy(f.Type, c); err != nil {
		s.sendError(id, err)
		return
	}
	if f.Type == protocol.TCopyIn {
		go c.run(func(root *os.File) (filecopy.Stats, error) { return c.copyIn(root, in) })
	} else {
		go c.run(func(root *os.File) (filecopy.Stats, error) { return c.copyOut(root, out) })
	}
}

// addCopy registers c, a copy's or a watch's stream, within maxCopies.
func (s *server) addCopy(kind protocol.Type, c *copyOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.copies[c.id] != nil || s.execs[c.id] != nil:
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "%s on stream %d: the stream is in use", kind, c.id)
	case len(s.copies) >= maxCopies:
		return errdefs.Errorf(errdefs.ErrLimit, "%s: %d copies and watches are running, the limit", kind, len(s.copies))
	}
	s.copies[c.id] = c
	return nil
}

func checkBoxPath(what, p string) error {
	if p == "" || len(p) > filecopy.MaxName || strings.ContainsRune(p, 0) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: empty, too long or has a NUL byte", what, p)
	}
	return nil
}

func validateCopyIn(req protocol.CopyIn) error {
	if err := checkBoxPath("copy in: destination", req.Dest); err != nil {
		return err
	}
	if n := req.Name; n != "" && (n == "." || n == ".." || len(n) > 255 || strings.ContainsAny(n, "/\x00")) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "copy in: bad source name %q", n)
	}
	return nil
}

// boxRoot opens the box's / as its processes see it.
func (s *server) boxRoot() (*os.File, error) {
	root := s.cfg.Root
	if sb := s.cfg.Sandbox; sb != nil {
		gen, err := sb.current()
		if err != nil {
			return nil, err
		}
		root = gen.root()
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "copy: open the box's root: %v", err)
	}
	return os.NewFile(uintptr(fd), root), nil
}

// boxPath makes p absolute in the box (relative paths are relative to /,
// as in docker cp), keeping a trailing slash.
func boxPath(p string) string {
	clean := path.Join("/", p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// run does one copy in the box's root and ends its stream with the
// result; a panic in it ends the stream, not the agent.
func (c *copyOp) run(do func(root *os.File) (filecopy.Stats, error)) {
	defer func() {
		if r := recover(); r != nil {
			c.s.cfg.Logf("panic in copy %d: %v\n%s", c.id, r, debug.Stack())
			c.end(filecopy.Stats{}, errdefs.Errorf(errdefs.ErrInternal, "agent: copy: panic: %v", r))
		}
	}()
	if c.slots != 0 {
		release, err := c.s.cfg.Lane.take(c.slots)
		if err != nil {
			c.end(filecopy.Stats{}, err)
			return
		}
		defer release()
		c.lane = c.s.cfg.Lane
		if c.in {
			c.buf = laneBuf()
		}
	}
	root, err := c.s.boxRoot()
	if err != nil {
		c.end(filecopy.Stats{}, err)
		return
	}
	defer root.Close()
	c.end(do(root))
}

func (c *copyOp) copyIn(root *os.File, req protocol.CopyIn) (filecopy.Stats, error) {
	t, err := filecopy.Prepare(filecopy.InRoot(root), boxPath(req.Dest), filecopy.Place{Base: req.Name, Overwrite: req.Overwrite})
	if err != nil {
		return filecopy.Stats{}, err
	}
	// Files belong to root, as docker cp makes them; modes, set-id bits
	// included, are the host's. Large files are written O_DIRECT: the
	// guest's page cache path is what is slow.
	var r io.Reader = c
	if c.lane == nil {
		r = bufio.NewReaderSize(c, protocol.MaxChunk)
	}
	st, err := t.Extract(r, filecopy.ExtractOptions{KeepSetID: true, Direct: true})
	if err == nil {
		err = c.drain()
	}
	if err == nil {
		err = t.Commit()
	} else {
		t.Discard()
	}
	return st, err
}

func (c *copyOp) copyOut(root *os.File, req protocol.CopyOut) (filecopy.Stats, error) {
	src := boxPath(req.Src)
	var dir *os.File
	var err error
	name, opt := ".", filecopy.SendOptions{Direct: true} // the page cache path is slow
	if req.Contents {
		// The directory itself resolves as any path in the box.
		if dir, err = filecopy.InRoot(root).OpenDir(src, false); err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				err = errdefs.Errorf(errdefs.ErrInvalidArgument, "copy out: %s is not a directory", req.Src)
			} else {
				err = errdefs.Errorf(errdefs.ErrNotFound, "copy out: %s: no such directory", req.Src)
			}
		}
	} else if dir, name, err = filecopy.OpenSource(filecopy.InRoot(root), src, req.Follow); err == nil {
		opt.Name = path.Base(src)
		if name == "." {
			dir.Close()
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "copy out: %s: the root can only be copied by its contents", req.Src)
		}
	}
	if err != nil {
		return filecopy.Stats{}, err
	}
	defer dir.Close()
	if c.lane != nil {
		c.startLaneWriter()
		st, err := filecopy.Send(c, dir, name, opt)
		if err == nil {
			err = c.laneFlush()
		}
		if werr := c.stopLaneWriter(); err == nil {
			err = werr
		}
		return st, err
	}
	w := bufio.NewWriterSize(c, protocol.MaxChunk)
	st, err := filecopy.Send(w, dir, name, opt)
	if err == nil {
		err = w.Flush()
	}
	return st, err
}

// end writes the stream's last frame, once, unless the host has gone.
func (c *copyOp) end(st filecopy.Stats, err error) {
	var f protocol.Frame
	var encErr error
	if err != nil {
		f, encErr = protocol.Encode(protocol.TError, c.id, protocol.ErrorOf(err))
	} else {
		f, encErr = protocol.Encode(protocol.TCopyDone, c.id, protocol.CopyDone{Entries: st.Entries, Bytes: st.Bytes, Skipped: st.Skipped})
	}
	c.s.wmu.Lock()
	c.mu.Lock()
	over := c.over
	c.over = true
	if c.err == nil {
		c.err = errCopyCancelled
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	if !over && encErr == nil {
		_ = c.s.writeLocked(f)
	}
	c.s.wmu.Unlock()
	c.s.mu.Lock()
	if c.s.copies[c.id] == c {
		delete(c.s.copies, c.id)
	}
	c.s.mu.Unlock()
}

var errCopyCancelled = errdefs.Errorf(errdefs.ErrClosed, "copy: cancelled by the host")

// Read is the copy in's tar stream.
func (c *copyOp) Read(p []byte) (int, error) {
	if c.lane != nil {
		return c.laneRead(p)
	}
	c.mu.Lock()
	for len(c.q) == 0 && !c.closed && c.err == nil {
		c.cond.Wait()
	}
	if err := c.err; err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if len(c.q) == 0 {
		c.mu.Unlock()
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy in: the stream ends in the middle of the archive")
	}
	n := copy(p, c.q[0])
	if c.q[0] = c.q[0][n:]; len(c.q[0]) == 0 {
		c.q[0] = nil
		c.q = c.q[1:]
	}
	c.qlen -= n
	c.mu.Unlock()
	c.sendCredit(n)
	return n, nil
}

// drain reads what follows the archive's end up to the host's close.
func (c *copyOp) drain() error {
	if c.lane != nil {
		return c.laneDrain()
	}
	for {
		c.mu.Lock()
		for len(c.q) == 0 && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return err
		}
		n := c.qlen
		c.q, c.qlen = nil, 0
		closed := c.closed
		c.mu.Unlock()
		c.sendCredit(n)
		if closed {
			return nil
		}
	}
}

func (c *copyOp) sendCredit(n int) {
	if n <= 0 {
		return
	}
	if f, err := protocol.Encode(protocol.TCredit, c.id, protocol.Credit{Fd: 0, Bytes: n}); err == nil {
		_ = c.send(f)
	}
}

// send writes a frame of the stream unless it is over.
func (c *copyOp) send(f protocol.Frame) error {
	c.s.wmu.Lock()
	defer c.s.wmu.Unlock()
	c.mu.Lock()
	over := c.over
	c.mu.Unlock()
	if over {
		return errCopyCancelled
	}
	return c.s.writeLocked(f)
}

// Write sends the copy out's tar stream within the window.
func (c *copyOp) Write(p []byte) (int, error) {
	if c.lane != nil {
		return c.laneWrite(p)
	}
	done := 0
	for done < len(p) {
		c.mu.Lock()
		for c.win <= 0 && c.err == nil {
			c.cond.Wait()
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return done, err
		}
		n := int(min(int64(len(p)-done), c.win, protocol.MaxChunk))
		c.win -= int64(n)
		c.mu.Unlock()
		if err := c.send(protocol.Frame{Type: protocol.TStdout, Stream: c.id, Payload: p[done : done+n]}); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// frame handles a host frame on the copy's stream.
func (c *copyOp) frame(f protocol.Frame) {
	if f.Type == protocol.TCancel {
		c.cancel()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.cond.Broadcast()
	switch f.Type {
	case protocol.TStdin:
		if c.closed || c.err != nil {
			return
		}
		if c.qlen+len(f.Payload) > protocol.InitialWindow {
			// The copy fails with this: its reader returns it.
			c.err = errdefs.Errorf(errdefs.ErrLimit, "copy in: %d bytes sent with %d unacknowledged, window %d",
				len(f.Payload), c.qlen, protocol.InitialWindow)
			return
		}
		c.q = append(c.q, f.Payload)
		c.qlen += len(f.Payload)
	case protocol.TStdinClose:
		c.closed = true
	case protocol.TLane:
		if !c.in || c.closed || c.err != nil {
			return
		}
		var ch protocol.LaneChunk
		err := protocol.Decode(f, &ch)
		if err == nil {
			err = c.checkChunk(ch)
		}
		if err != nil {
			c.err = err // the copy fails with it
			return
		}
		c.chunks = append(c.chunks, ch)
		c.next++
	case protocol.TLaneFree:
		var lf protocol.LaneFree
		if protocol.Decode(f, &lf) == nil && lf.Slots > 0 {
			c.free = min(c.free+lf.Slots, c.slots)
		}
	case protocol.TCredit:
		var cr protocol.Credit
		if protocol.Decode(f, &cr) == nil && cr.Fd == 1 && cr.Bytes > 0 {
			c.win = min(c.win+int64(cr.Bytes), maxWindow)
		}
	}
}

// cancel stops the copy without a last frame (the host has gone or given
// up); what it made beside its destination is removed.
func (c *copyOp) cancel() {
	c.s.wmu.Lock()
	c.mu.Lock()
	c.over = true
	if c.err == nil {
		c.err = errCopyCancelled
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	c.s.wmu.Unlock()
}

// checkChunk checks the host's announcement of the copy in's next chunk:
// in its next slot, 1 to LaneSlot bytes, within the slots it may hold.
func (c *copyOp) checkChunk(ch protocol.LaneChunk) error {
	want := int64(c.next%max(c.slots, 1)) * protocol.LaneSlot
	switch {
	case c.slots == 0:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "copy in: a lane chunk on a copy without the lane")
	case ch.Off != want || ch.Len < 1 || ch.Len > protocol.LaneSlot:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "copy in: lane chunk of %d bytes at %d: want 1 to %d bytes at %d", ch.Len, ch.Off, protocol.LaneSlot, want)
	case len(c.chunks) >= c.slots:
		return errdefs.Errorf(errdefs.ErrLimit, "copy in: lane chunk with %d unread, lane of %d slots", len(c.chunks), c.slots)
	}
	return nil
}

// laneRead reads the copy in's stream from the lane, a chunk at a time;
// a chunk's slot is freed as soon as it is in the buffer.
func (c *copyOp) laneRead(p []byte) (int, error) {
	if len(c.cur) == 0 {
		c.mu.Lock()
		for len(c.chunks) == 0 && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return 0, err
		}
		if len(c.chunks) == 0 {
			c.mu.Unlock()
			return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy in: the stream ends in the middle of the archive")
		}
		ch := c.chunks[0]
		c.chunks = c.chunks[1:]
		c.mu.Unlock()
		data, err := c.lane.read(c.buf, ch)
		if err != nil {
			return 0, err
		}
		c.sendLaneFree(1)
		c.cur = data
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// laneDrain frees what follows the archive's end up to the host's close.
func (c *copyOp) laneDrain() error {
	c.cur = nil
	for {
		c.mu.Lock()
		for len(c.chunks) == 0 && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return err
		}
		n := len(c.chunks)
		c.chunks = nil
		closed := c.closed
		c.mu.Unlock()
		c.sendLaneFree(n)
		if closed {
			return nil
		}
	}
}

func (c *copyOp) sendLaneFree(n int) {
	if n <= 0 {
		return
	}
	if f, err := protocol.Encode(protocol.TLaneFree, c.id, protocol.LaneFree{Slots: n}); err == nil {
		_ = c.send(f)
	}
}

// startLaneWriter starts the goroutine that writes a copy out's chunks
// into the lane and announces them, in order; a failure stops the copy.
func (c *copyOp) startLaneWriter() {
	c.spare = make(chan []byte, 2)
	c.spare <- laneBuf()
	c.spare <- laneBuf()
	c.jobs = make(chan laneJob, 1)
	c.wdone = make(chan struct{})
	go func() {
		defer close(c.wdone)
		failed := false
		for j := range c.jobs {
			if !failed {
				err := c.lane.write(j.buf, j.n, j.off)
				if err == nil {
					var f protocol.Frame
					if f, err = protocol.Encode(protocol.TLane, c.id, protocol.LaneChunk{Off: j.off, Len: j.n}); err == nil {
						err = c.send(f)
					}
				}
				if err != nil {
					failed = true
					c.mu.Lock()
					if c.err == nil {
						c.err = err
					}
					c.cond.Broadcast()
					c.mu.Unlock()
				}
			}
			c.spare <- j.buf
		}
	}()
}

// stopLaneWriter waits for the chunks queued so far; it returns what
// stopped the copy, if anything did.
func (c *copyOp) stopLaneWriter() error {
	close(c.jobs)
	<-c.wdone
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// laneWrite gathers the copy out's stream into slot-sized chunks.
func (c *copyOp) laneWrite(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		if c.buf == nil {
			c.buf = <-c.spare
		}
		n := copy(c.buf[c.fill:], p[done:])
		c.fill += n
		done += n
		if c.fill == len(c.buf) {
			if err := c.laneFlush(); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// laneFlush queues the gathered chunk for the next slot once the host has
// freed it.
func (c *copyOp) laneFlush() error {
	if c.fill == 0 {
		return nil
	}
	c.mu.Lock()
	for c.free <= 0 && c.err == nil {
		c.cond.Wait()
	}
	if err := c.err; err != nil {
		c.mu.Unlock()
		return err
	}
	c.free--
	c.mu.Unlock()
	off := int64(c.next%c.slots) * protocol.LaneSlot
	c.next++
	c.jobs <- laneJob{c.buf, c.fill, off}
	c.buf, c.fill = nil, 0
	return nil
}
