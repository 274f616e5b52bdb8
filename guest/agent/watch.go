//go:build linux

package agent

import (
	"errors"
	"os"
	"path"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A watch (TWatch) is a copy stream whose data is the events of an inotify
// instance: it shares the copies' registry, window and cancel. What it
// holds is bounded: protocol.MaxWatches directories, one read buffer, and
// the window; when the host does not read, the kernel's queue fills and
// overflows (a WatchOverflow record) instead of this agent's memory.

// watchMask is what a watched directory reports. The watch is added
// through /proc/self/fd of the directory opened in the box's root, a
// magic link that must be followed (no IN_DONT_FOLLOW).
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR |
	unix.IN_EXCL_UNLINK

// watchPoll is how often a watch with nothing to read looks for its cancel.
const watchPoll = 200 * time.Millisecond

func (s *server) startWatch(f protocol.Frame) {
	id := f.Stream
	if id == 0 {
		s.sendError(0, errdefs.Errorf(errdefs.ErrInvalidArgument, "watch on stream 0: a watch needs a stream id of its own"))
		return
	}
	var req protocol.Watch
	err := protocol.Decode(f, &req)
	if err == nil {
		err = checkBoxPath("watch", req.Path)
	}
	if err == nil && s.cfg.RootErr != nil {
		err = s.cfg.RootErr
	}
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.startEventStream(f.Type, id, func(c *copyOp, root *os.File) error { return c.watch(root, req) })
}

// startEventStream runs work on a copy stream of its own (the copies'
// registry, window and cancel) that sends events until it ends: TCopyDone
// when work returns nil, TError otherwise.
func (s *server) startEventStream(kind protocol.Type, id uint32, work func(c *copyOp, root *os.File) error) {
	c := &copyOp{s: s, id: id, win: protocol.InitialWindow}
	c.cond = sync.NewCond(&c.mu)
	if err := s.addCopy(kind, c); err != nil {
		s.sendError(id, err)
		return
	}
	go c.run(func(root *os.File) (filecopy.Stats, error) { return filecopy.Stats{}, work(c, root) })
}

// readInotify reads events of the (non-blocking) inotify fd into buf once
// there are some; 0 when the host cancelled the stream first. The wait
// wakes every watchPoll only to look for the cancel.
func (c *copyOp) readInotify(fd int, buf []byte) (int, error) {
	for {
		if c.stopped() {
			return 0, nil
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, int(watchPoll/time.Millisecond)); n <= 0 || err != nil {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

// stopped reports whether the host cancelled the watch.
func (c *copyOp) stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// inotify is one watch's inotify instance and the directories it watches.
type inotify struct {
	fd        int
	root      *os.File // the box's root
	top       string   // the watched directory, in the box
	recursive bool
	dirs      map[int32]string // watch descriptor -> directory, relative to top ("" is top)
	topWd     int32
	full      bool // MaxWatches reached: later directories go unwatched (reported once)
}

// watch sends the events under req.Path until the host cancels (nil: no
// last frame is sent then) or the directory goes (nil: TCopyDone).
func (c *copyOp) watch(root *os.File, req protocol.Watch) error {
	top := path.Clean("/" + req.Path)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return errdefs.Errorf(errdefs.ErrLimit, "watch %s: inotify: %v", top, err)
	}
	defer unix.Close(fd)
	in := &inotify{fd: fd, root: root, top: top, recursive: req.Recursive, dirs: map[int32]string{}}
	if err := in.add("", 0); err != nil {
		return err
	}
	in.topWd = -1
	for wd, rel := range in.dirs {
		if rel == "" {
			in.topWd = wd
		}
	}
	if in.full {
		return errdefs.Errorf(errdefs.ErrLimit, "watch %s: more than %d directories", top, protocol.MaxWatches)
	}
	// The watches are in place: say so, so that the host knows a change
	// from now on is seen.
	if _, err := c.Write(protocol.AppendWatchRecord(nil, 0, "")); err != nil {
		return nil
	}
	buf := make([]byte, 64<<10)
	var out []byte
	for {
		n, err := c.readInotify(fd, buf)
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInternal, "watch %s: read inotify: %v", top, err)
		}
		if n == 0 {
			return nil // cancelled
		}
		out = out[:0]
		gone := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameEnd := off + unix.SizeofInotifyEvent + int(ev.Len)
			if nameEnd > n {
				break
			}
			name := string(buf[off+unix.SizeofInotifyEvent : nameEnd])
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			off = nameEnd
			out, gone = in.event(out, ev.Wd, ev.Mask, name)
			if gone {
				break
			}
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return nil // cancelled
			}
		}
		if gone {
			return nil
		}
	}
}

// event appends the records of one inotify event; gone: the watched
// directory itself went.
func (in *inotify) event(out []byte, wd int32, mask uint32, name string) ([]byte, bool) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return protocol.AppendWatchRecord(out, protocol.WatchOverflow, ""), false
	}
	dir, ok := in.dirs[wd]
	if !ok {
		return out, false
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(in.dirs, wd)
		return out, wd == in.topWd
	}
	if wd == in.topWd && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		return out, true
	}
	if name == "" {
		return out, false // the directory's own change is its parent's event
	}
	rel := path.Join(dir, name)
	add := func(op protocol.WatchOp) { out = protocol.AppendWatchRecord(out, op, rel) }
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		add(protocol.WatchCreate)
		if mask&unix.IN_ISDIR != 0 && in.recursive && depth(rel) <= protocol.MaxWatchDepth {
			wasFull := in.full
			in.add(rel, depth(rel))
			if in.full && !wasFull {
				out = protocol.AppendWatchRecord(out, protocol.WatchOverflow, "")
			}
		}
	case mask&unix.IN_MODIFY != 0:
		add(protocol.WatchWrite)
	case mask&unix.IN_DELETE != 0:
		add(protocol.WatchRemove)
	case mask&unix.IN_MOVED_FROM != 0:
		add(protocol.WatchRename)
	case mask&unix.IN_ATTRIB != 0:
		add(protocol.WatchChmod)
	}
	return out, false
}

func depth(rel string) int {
	n := 1
	for _, c := range rel {
		if c == '/' {
			n++
		}
	}
	return n
}

// add watches the directory rel (under top) and, when recursive, its
// subdirectories to MaxWatchDepth, at most MaxWatches in all. A
// subdirectory that cannot be watched (gone meanwhile, no permission)
// is skipped; the top one failing fails the watch.
func (in *inotify) add(rel string, d int) error {
	if len(in.dirs) >= protocol.MaxWatches {
		in.full = true
		return nil
	}
	p := path.Join(in.top, rel)
	dir, err := filecopy.InRoot(in.root).OpenDir(p, false)
	if err != nil {
		if rel != "" {
			return nil
		}
		switch {
		case errors.Is(err, unix.ENOENT):
			return errdefs.Errorf(errdefs.ErrNotFound, "watch %s: no such directory", p)
		case errors.Is(err, unix.ENOTDIR):
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "watch %s: not a directory", p)
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "watch %s: %v", p, err)
	}
	defer dir.Close()
	wd, err := unix.InotifyAddWatch(in.fd, "/proc/self/fd/"+strconv.Itoa(int(dir.Fd())), watchMask)
	if err != nil {
		if rel != "" {
			return nil
		}
		if err == unix.ENOSPC {
			return errdefs.Errorf(errdefs.ErrLimit, "watch %s: the box's inotify watches are used up", p)
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "watch %s: %v", p, err)
	}
	in.dirs[int32(wd)] = rel
	if !in.recursive || d >= protocol.MaxWatchDepth {
		return nil
	}
	for {
		entries, err := dir.ReadDir(256)
		for _, e := range entries {
			if e.IsDir() { // a symlink to a directory is not one: not followed
				in.add(path.Join(rel, e.Name()), d+1)
				if in.full {
					return nil
				}
			}
		}
		if err != nil {
			return nil
		}
	}
}
