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
}

func newWindow(credit func(int)) *window {
	w := &window{credit: credit, batch: creditBatch}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *window) push(p []byte) error {
	w.mu.Lock()
	if len(w.buf)+len(p) > protocol.InitialWindow {
		n := len(w.buf)
		w.mu.Unlock()
		return errdefs.Errorf(errdefs.ErrLimit, "%d bytes of output beyond the window (%d unread, window %d)", len(p), n, protocol.InitialWindow)
	}
	w.buf = append(w.buf, p...)
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
	w.owed += n
	give := 0
	if w.owed >= w.batch && w.err == nil {
		give, w.owed = w.owed, 0
	}
	w.mu.Unlock()
	if give > 0 {
		w.credit(give)
	}
	return n, nil
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
