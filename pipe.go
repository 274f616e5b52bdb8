package boxlite

import (
	"io"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// creditBatch is how many bytes a window's reader consumes before it returns
// them to the agent in one Credit. Each Credit wakes the guest's agent,
// which under emulation costs about as much as moving a data frame; one per
// read (io.Copy reads 32 KiB) was two per 64 KiB frame. Holding back less
// than the window never stalls the agent: with nothing unread it still has
// InitialWindow-creditBatch to send.
const creditBatch = protocol.InitialWindow / 4

// window is a flow-controlled receive buffer for one output fd of an exec.
// The connection's reader appends what the agent sent; Read hands bytes to the
// user and returns their window to the agent through credit, in batches of
// creditBatch. An honest agent never has more than protocol.InitialWindow
// bytes unread here; push refuses a frame that would overrun it, so the
// buffer stays bounded whatever the guest sends.
type window struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	owed   int   // bytes read and not yet credited (less than batch)
	batch  int   // credit once this many bytes were read (creditBatch, or 1: see Command.Detachable)
	err    error // set once no more data will come (io.EOF or a failure)
	credit func(n int)
	notify func() // optional: called after data or the end arrives

	// Lane chunks (an exec's stdout through the lane, execlane.go): their
	// bytes take no credit; each chunk's slot is freed (laneFree) once
	// read through. read and pushed count bytes since the start.
	read0, pushed int64
	laneEnds      []laneSeg
	chanUnread    int // unread bytes that came on the channel
	laneFree      func()
}

// laneSeg is one lane chunk in the window: its bytes end at end, and
// start at end-n.
type laneSeg struct {
	end int64
	n   int
}

func newWindow(credit func(int)) *window {
	w := &window{credit: credit, batch: creditBatch}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *window) push(p []byte) error { return w.pushOf(p, false) }

// pushOf appends p, a lane chunk's bytes with lane (the caller bounds
// those by the lane's slots), else a channel frame's.
func (w *window) pushOf(p []byte, lane bool) error {
	w.mu.Lock()
	if !lane && w.chanUnread+len(p) > protocol.InitialWindow {
		n := w.chanUnread
		w.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrLimit, "%d bytes of output beyond the window (%d unread, window %d)", len(p), n, protocol.InitialWindow)
	}
	w.buf = append(w.buf, p...)
	w.pushed += int64(len(p))
	if lane {
		w.laneEnds = append(w.laneEnds, laneSeg{w.pushed, len(p)})
	} else {
		w.chanUnread += len(p)
	}
	notify := w.notify
	w.mu.Unlock()
	w.cond.Broadcast()
	if notify != nil {
		notify()
	}
	return nil
}

// close ends the stream; buffered bytes stay readable. The first error wins.
func (w *window) close(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	notify := w.notify
	w.mu.Unlock()
	w.cond.Broadcast()
	if notify != nil {
		notify()
	}
}

func (w *window) setNotify(f func()) {
	w.mu.Lock()
	w.notify = f
	w.mu.Unlock()
}

func (w *window) Read(p []byte) (int, error) { return w.read(p, true) }

func (w *window) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf) > 0 || w.err != nil
}

// read returns buffered bytes; without block it returns (0, nil) when there
// are none yet.
func (w *window) read(p []byte, block bool) (int, error) {
	w.mu.Lock()
	for block && len(w.buf) == 0 && w.err == nil {
		w.cond.Wait()
	}
	if len(w.buf) == 0 {
		err := w.err
		w.mu.Unlock()
		return 0, err
	}
	n := copy(p, w.buf)
	w.buf = w.buf[n:]
	if len(w.buf) == 0 {
		w.buf = nil // let the backing array go
	}
	ch, freed := w.consumed(n)
	w.owed += ch
	w.chanUnread -= ch
	give := 0
	if w.owed >= w.batch && w.err == nil {
		give, w.owed = w.owed, 0
	}
	w.mu.Unlock()
	if give > 0 {
		w.credit(give)
	}
	for range freed {
		w.laneFree()
	}
	return n, nil
}

// consumed accounts for n more bytes read: how many of them came on the
// channel, and how many lane chunks were read through.
func (w *window) consumed(n int) (ch, freed int) {
	from := w.read0
	w.read0 += int64(n)
	ch = n
	for len(w.laneEnds) > 0 {
		s := w.laneEnds[0]
		lo, hi := max(from, s.end-int64(s.n)), min(w.read0, s.end)
		if lo >= hi && s.end > w.read0 {
			break
		}
		ch -= int(max(hi-lo, 0))
		if s.end > w.read0 {
			break
		}
		w.laneEnds = w.laneEnds[1:]
		freed++
	}
	return ch, freed
}

var _ io.Reader = (*window)(nil)

// sendWindow is the sender's side of flow control: how many bytes may be
// in flight before the peer acknowledges them. The peer can only return what
// was sent, so give refuses credit that would raise the window past its
// initial size (a forged Credit{2^62} would otherwise overflow it).
type sendWindow struct {
	mu    sync.Mutex
	cond  *sync.Cond
	avail int
	max   int // the initial window
	err   error
}

func newSendWindow(n int) *sendWindow {
	s := &sendWindow{avail: n, max: n}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// take waits for window and returns how many of want bytes may be sent now.
func (s *sendWindow) take(want int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.avail == 0 && s.err == nil {
		s.cond.Wait()
	}
	if s.err != nil {
		return 0, s.err
	}
	n := min(want, s.avail)
	s.avail -= n
	return n, nil
}

func (s *sendWindow) give(n int) error {
	s.mu.Lock()
	if n <= 0 || n > s.max-s.avail {
		avail := s.avail
		s.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrLimit, "credit of %d bytes with %d of %d available: more than was sent", n, avail, s.max)
	}
	s.avail += n
	s.mu.Unlock()
	s.cond.Broadcast()
	return nil
}

func (s *sendWindow) close(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}
