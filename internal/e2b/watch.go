package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	pb "github.com/boxlite/boxlite/internal/e2b/envd/filesystem"
	"github.com/boxlite/boxlite/internal/filecopy"
)

// Watching is inotify in the box's agent (Box.Watch) when the agent has it;
// else polling: the box is listed every pollEvery and compared with the
// listing before.
const (
	pollEvery     = 500 * time.Millisecond
	maxEvents     = 1024            // queued events of one watcher; past it the oldest go
	watcherIdle   = 5 * time.Minute // a polled watcher nobody asks for ends
	maxWatchDepth = 16              // a recursive watch's depth
	maxWatchFails = 5               // listings failed in a row end a watch
	idleCheck     = 30 * time.Second
)

type watcher struct {
	id, user, dir string
	depth         uint32
	polled        bool
	kick          chan struct{}
	box           *boxlite.Watcher // inotify in the box; nil: polled
	done          chan struct{}
	stopOnce      sync.Once

	mu     sync.Mutex
	events []*pb.FilesystemEvent
	seen   map[string]entry
	asked  time.Time
	err    error
}

func (w *watcher) stop() { w.stopOnce.Do(func() { close(w.done) }) }

func (w *watcher) why() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return fmt.Errorf("stopped")
}

func (w *watcher) drain() []*pb.FilesystemEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.events
	w.events = nil
	w.asked = time.Now()
	return evs
}

func (sb *sandbox) newWatcher(ctx context.Context, user, dir string, recursive bool) (*watcher, error) {
	var idb [12]byte
	rand.Read(idb[:])
	w := &watcher{id: hex.EncodeToString(idb[:]), user: user, dir: dir, depth: 1, kick: make(chan struct{}, 1), done: make(chan struct{}), asked: time.Now()}
	if recursive {
		w.depth = maxWatchDepth
	}
	bw, err := sb.box.Watch(ctx, dir, recursive)
	switch {
	case err == nil:
		w.box = bw
	case errors.Is(err, errdefs.ErrUnsupported): // an older agent: poll
		if w.seen, err = sb.snapshot(ctx, w); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	sb.mu.Lock()
	if len(sb.watchers) >= sb.s.lim.WatchersPer {
		sb.mu.Unlock()
		w.closeBox()
		return nil, statusErr(http.StatusTooManyRequests, "sandbox %s has %d watchers, its limit", sb.box.ID(), sb.s.lim.WatchersPer)
	}
	if sb.closed {
		sb.mu.Unlock()
		w.closeBox()
		return nil, statusErr(http.StatusConflict, "sandbox %s is going away", sb.box.ID())
	}
	sb.watchers[w.id] = w
	sb.mu.Unlock()
	if w.box != nil {
		go sb.follow(w)
	} else {
		go sb.poll(w)
	}
	return w, nil
}

func (w *watcher) closeBox() {
	if w.box != nil {
		w.box.Close()
	}
}

// eventTypes maps the box's events to E2B's; an overflow has none (the
// events lost are lost, as envd's).
var eventTypes = map[boxlite.WatchOp]pb.EventType{
	boxlite.WatchCreate: pb.EventType_EVENT_TYPE_CREATE, boxlite.WatchWrite: pb.EventType_EVENT_TYPE_WRITE,
	boxlite.WatchRemove: pb.EventType_EVENT_TYPE_REMOVE, boxlite.WatchRename: pb.EventType_EVENT_TYPE_RENAME,
	boxlite.WatchChmod: pb.EventType_EVENT_TYPE_CHMOD,
}

// follow queues the box watch's events until the watcher stops, the watch
// ends, or nobody has asked a polled watcher for watcherIdle.
func (sb *sandbox) follow(w *watcher) {
	go func() {
		t := time.NewTicker(idleCheck)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				w.box.Close()
				return
			case <-t.C:
				w.mu.Lock()
				idle := w.polled && time.Since(w.asked) > watcherIdle
				w.mu.Unlock()
				if idle {
					sb.dropWatcher(w)
				}
			}
		}
	}()
	for {
		ev, err := w.box.Next()
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("%q itself was removed or moved", truncate(w.dir))
			}
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
			sb.dropWatcher(w)
			return
		}
		t, ok := eventTypes[ev.Op]
		if !ok {
			continue
		}
		w.push([]*pb.FilesystemEvent{{Name: ev.Name, Type: t}})
	}
}

// push queues events, at most maxEvents (the oldest go), and wakes a
// stream waiting for them.
// A copy into the box (an upload) is made in a directory beside its
// destination and renamed into place: that directory's events are not
// the user's, and go.
func (w *watcher) push(evs []*pb.FilesystemEvent) {
	kept := evs[:0]
	for _, ev := range evs {
		if !strings.HasPrefix(path.Base(ev.Name), filecopy.TmpPrefix) && !strings.Contains(ev.Name, "/"+filecopy.TmpPrefix) {
			kept = append(kept, ev)
		}
	}
	if evs = kept; len(evs) == 0 {
		return
	}
	w.mu.Lock()
	w.events = append(w.events, evs...)
	if over := len(w.events) - maxEvents; over > 0 {
		w.events = append([]*pb.FilesystemEvent(nil), w.events[over:]...)
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (sb *sandbox) dropWatcher(w *watcher) {
	sb.mu.Lock()
	if sb.watchers[w.id] == w {
		delete(sb.watchers, w.id)
	}
	sb.mu.Unlock()
	w.stop()
}

func (sb *sandbox) snapshot(ctx context.Context, w *watcher) (map[string]entry, error) {
	es, err := sb.fsOp(ctx, w.user, "list", w.dir, fmt.Sprint(w.depth))
	if err != nil {
		return nil, err
	}
	m := make(map[string]entry, len(es))
	for _, e := range es {
		m[e.path[min(2, len(e.path)):]] = e // "./a/b" -> "a/b"
	}
	return m, nil
}

func (sb *sandbox) poll(w *watcher) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		w.mu.Lock()
		idle := w.polled && time.Since(w.asked) > watcherIdle
		w.mu.Unlock()
		if idle {
			sb.dropWatcher(w)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), fsTimeout)
		now, err := sb.snapshot(ctx, w)
		cancel()
		if err != nil {
			if fails++; fails >= maxWatchFails {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				w.stop()
				return
			}
			continue
		}
		fails = 0
		var evs []*pb.FilesystemEvent
		add := func(name string, t pb.EventType) { evs = append(evs, &pb.FilesystemEvent{Name: name, Type: t}) }
		for name, e := range now {
			old, ok := w.seen[name]
			switch {
			case !ok:
				add(name, pb.EventType_EVENT_TYPE_CREATE)
				if e.size > 0 {
					add(name, pb.EventType_EVENT_TYPE_WRITE)
				}
			case old.size != e.size || old.mtime != e.mtime:
				add(name, pb.EventType_EVENT_TYPE_WRITE)
			case old.mode != e.mode:
				add(name, pb.EventType_EVENT_TYPE_CHMOD)
			}
		}
		for name := range w.seen {
			if _, ok := now[name]; !ok {
				add(name, pb.EventType_EVENT_TYPE_REMOVE)
			}
		}
		w.seen = now
		if len(evs) == 0 {
			continue
		}
		w.push(evs)
	}
}
