package boxlite

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// WatchOp is what happened to a watched entry.
type WatchOp uint8

const (
	WatchCreate   = WatchOp(protocol.WatchCreate)   // made, or moved in
	WatchWrite    = WatchOp(protocol.WatchWrite)    // written
	WatchRemove   = WatchOp(protocol.WatchRemove)   // removed
	WatchRename   = WatchOp(protocol.WatchRename)   // moved away (its new name, if watched, is a WatchCreate)
	WatchChmod    = WatchOp(protocol.WatchChmod)    // its mode, owner or times changed
	WatchOverflow = WatchOp(protocol.WatchOverflow) // events were lost; Name is empty
)

func (op WatchOp) String() string {
	switch op {
	case WatchCreate:
		return "create"
	case WatchWrite:
		return "write"
	case WatchRemove:
		return "remove"
	case WatchRename:
		return "rename"
	case WatchChmod:
		return "chmod"
	case WatchOverflow:
		return "overflow"
	}
	return fmt.Sprintf("WatchOp(%d)", uint8(op))
}

// WatchEvent is one change under a watched directory; Name is relative to
// it.
type WatchEvent struct {
	Op   WatchOp
	Name string
}

// Watcher is a watch of a box directory (Box.Watch).
type Watcher struct {
	s *copyStream
	r *bufio.Reader
}

// Watch watches the box directory dir with inotify in the box's agent:
// changes to its entries and, when recursive, to its subdirectories'
// (protocol.MaxWatchDepth levels, protocol.MaxWatches directories, else
// ErrLimit; directories made later are watched as they come, and past the
// bound a WatchOverflow says some are not). Paths resolve as the box's
// processes see them. Watch returns once the watch is in place: a change
// after it is seen. Events wait in the box while nobody reads them (a
// window of them, then the box's inotify queue, which overflows into one
// WatchOverflow). Close ends the watch. ErrNotFound: dir is not there;
// ErrInvalidArgument: it is not a directory; ErrUnsupported: the box runs
// an agent without watches (restart it to update).
func (b *Box) Watch(ctx context.Context, dir string, recursive bool) (*Watcher, error) {
	what := fmt.Sprintf("watch %s", dir)
	c, info, err := b.running(ctx, what)
	if err != nil {
		return nil, err
	}
	if !info.Hello.Has(protocol.FeatureWatch) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s runs an agent without watches (%s); restart the box to update it", what, b.rec.ID, info.Hello.Agent)
	}
	s := newCopyStream(c, what)
	s.recv = newWindow(func(n int) { c.send(protocol.TCredit, s.id, protocol.Credit{Fd: 1, Bytes: n}) })
	if _, err := c.open(s, protocol.TWatch, protocol.Watch{Path: dir, Recursive: recursive}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	w := &Watcher{s: s, r: bufio.NewReader(s.recv)}
	started := make(chan error, 1)
	go func() {
		op, _, err := w.read()
		if err == io.EOF {
			err = errdefs.Errorf(errdefs.ErrNotFound, "%s: the directory went before the watch began", what)
		} else if err == nil && op != 0 {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box sent an event before the watch began", what)
		}
		started <- err
	}()
	select {
	case err = <-started:
	case <-ctx.Done():
		err = errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", what, ctx.Err())
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// read reads one record.
func (w *Watcher) read() (WatchOp, string, error) {
	var h [3]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box ended the watch within a record", w.s.what)
		}
		return 0, "", err
	}
	n := int(h[1])<<8 | int(h[2])
	if n > protocol.MaxWatchName || WatchOp(h[0]) > WatchOverflow {
		return 0, "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box sent a bad record (op %d, name of %d bytes)", w.s.what, h[0], n)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(w.r, name); err != nil {
		return 0, "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box ended the watch within a record", w.s.what)
	}
	return WatchOp(h[0]), string(name), nil
}

// Next waits for the next event. io.EOF: the watched directory itself
// went (removed or moved away); another error: the watch failed, or was
// closed.
func (w *Watcher) Next() (WatchEvent, error) {
	op, name, err := w.read()
	if err == nil && op == 0 {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box began the watch twice", w.s.what)
	}
	if err != nil {
		return WatchEvent{}, err
	}
	return WatchEvent{Op: op, Name: name}, nil
}

// Close ends the watch; a Next waiting returns an error.
func (w *Watcher) Close() error {
	w.s.abandon(errdefs.Errorf(errdefs.ErrClosed, "%s: closed", w.s.what))
	return nil
}
