package boxlite

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// LaneEnv set to "off" makes copies take the channel, not the lane
// (protocol.FeatureLane): for tests and comparisons.
const LaneEnv = "BOXLITE_COPY_LANE"

// hostLane is one copy's hold on its box's lane file: flock'ed, so one copy
// at a time (of any process) uses it; the others take the channel.
type hostLane struct {
	f     *os.File
	slots int
}

// takeLane holds the box's lane for a copy, or returns nil when the copy
// must take the channel: an agent without the feature, LaneEnv=off, no
// lane file, or another copy holding it.
func (b *Box) takeLane(hello protocol.Hello) *hostLane {
	if !hello.Has(protocol.FeatureLane) || os.Getenv(LaneEnv) == "off" {
		return nil
	}
	f, err := os.OpenFile(b.path(shimapi.LaneFile), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < shimapi.LaneSize ||
		unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	return &hostLane{f: f, slots: shimapi.LaneSize / protocol.LaneSlot}
}

// release gives the lane's disk space back, all of it (the box may have
// written where it announced nothing), and the lane to the next copy.
func (l *hostLane) release() {
	_ = unix.Fallocate(int(l.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, shimapi.LaneSize)
	l.f.Close() // and with it the lock
}

// slotOff is where the copy's n-th chunk goes.
func (l *hostLane) slotOff(n int) int64 { return int64(n%l.slots) * protocol.LaneSlot }

// laneWriter sends a copy in's stream through the lane: slot-sized chunks
// written into the lane file, each announced (TLane) once the box has freed
// its slot (TLaneFree, counted in s.send).
type laneWriter struct {
	s    *copyStream
	l    *hostLane
	buf  []byte
	fill int
	n    int // chunks so far
}

func (w *laneWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		k := copy(w.buf[w.fill:], p[done:])
		w.fill += k
		done += k
		if w.fill == len(w.buf) {
			if err := w.Flush(); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// Flush writes and announces the chunk gathered so far.
func (w *laneWriter) Flush() error {
	if w.fill == 0 {
		return nil
	}
	if _, err := w.s.send.take(1); err != nil {
		return err
	}
	off := w.l.slotOff(w.n)
	w.n++
	if _, err := w.l.f.WriteAt(w.buf[:w.fill], off); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "lane: write %d bytes at %d: %v", w.fill, off, err)
	}
	err := w.s.c.send(protocol.TLane, w.s.id, protocol.LaneChunk{Off: off, Len: w.fill})
	w.fill = 0
	return err
}

// laneReader is a copy out's stream from the lane. The box's announcements
// (TLane) are checked as they come: each in the next slot, 1 to LaneSlot
// bytes, no more held than the lane's slots. Nothing is read but what was
// announced; a slot is freed (TLaneFree) once read.
type laneReader struct {
	l    *hostLane
	free func() // sends TLaneFree for one slot

	mu     sync.Mutex
	cond   *sync.Cond
	chunks []protocol.LaneChunk
	n      int // chunks announced so far
	err    error

	buf []byte // owned by the reader
	cur []byte
}

func newLaneReader(l *hostLane, free func()) *laneReader {
	r := &laneReader{l: l, free: free, buf: make([]byte, protocol.LaneSlot)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// push takes the box's announcement of its next chunk.
func (r *laneReader) push(ch protocol.LaneChunk) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := r.l.slotOff(r.n)
	switch {
	case r.err != nil:
		return nil // the copy is over: a late frame
	case ch.Off != want || ch.Len < 1 || ch.Len > protocol.LaneSlot:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "the box announced a lane chunk of %d bytes at offset %d: want 1 to %d bytes at %d", ch.Len, ch.Off, protocol.LaneSlot, want)
	case len(r.chunks) >= r.l.slots:
		return errdefs.Errorf(errdefs.ErrLimit, "the box announced a lane chunk with %d unread, the lane has %d slots", len(r.chunks), r.l.slots)
	}
	r.n++
	r.chunks = append(r.chunks, ch)
	r.cond.Broadcast()
	return nil
}

// close ends the stream: at its end (io.EOF) announced chunks stay readable. The first error wins.
func (r *laneReader) close(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	if err != io.EOF {
		r.chunks = nil // a failed copy reads no further
	}
	r.mu.Unlock()
	r.cond.Broadcast()
}

func (r *laneReader) Read(p []byte) (int, error) {
	if len(r.cur) == 0 {
		r.mu.Lock()
		for len(r.chunks) == 0 && r.err == nil {
			r.cond.Wait()
		}
		if len(r.chunks) == 0 {
			err := r.err
			r.mu.Unlock()
			return 0, err
		}
		ch := r.chunks[0]
		r.chunks = r.chunks[1:]
		r.mu.Unlock()
		n, err := r.l.f.ReadAt(r.buf[:ch.Len], ch.Off)
		if n < ch.Len {
			return 0, errdefs.Errorf(errdefs.ErrInternal, "lane: read %d bytes at %d: %d read: %v", ch.Len, ch.Off, n, err)
		}
		r.free()
		r.cur = r.buf[:n]
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// laneFail ends a copy whose box broke the lane's rules: the copy fails
// with err, the box is told to stop it, and the box lives on.
func (s *copyStream) laneFail(err error) {
	_ = s.c.send(protocol.TCancel, s.id, nil)
	s.c.forget(s.id)
	s.finish(fmt.Errorf("%s: %w", s.what, err))
}
