// Package e2b serves E2B's API on `boxlite serve` (docs/e2b.md): the
// control plane under /e2b (sandboxes over boxes; templates are local
// images by a table) and envd's services for every request carrying
// E2b-Sandbox-Id (E2B_SANDBOX_URL), served by the host: no daemon runs in
// the box, each call becomes the box's own operations (Exec, copies).
//
// Everything a request carries is the network's: bodies, Connect frames
// and uploads are bounded, paths are checked before they reach a box, every
// envd request must carry its sandbox's access token, and a process's output
// reaches a client one bounded message at a time, so a slow client holds
// the process back rather than growing this server.
package e2b

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// Prefix is where the control plane is mounted: E2B_API_URL is the server's
// URL with it. E2B_SANDBOX_URL may be the same URL, or the server's root.
const Prefix = "/e2b"

// Limits bound what a request and a sandbox may hold. Zero fields take the
// defaults.
type Limits struct {
	SandboxesPerKey int           // sandboxes a key may have
	SnapshotsPerKey int           // snapshots a key may keep
	MaxTimeout      time.Duration // a sandbox's longest life between timeouts
	JSONBodyBytes   int64
	TransferBytes   int64 // one uploaded or downloaded file
	ProcsPerSandbox int   // envd processes running at once
	WatchersPer     int   // file watchers of a sandbox
}

// Defaults.
const (
	DefaultSandboxesPerKey = 50
	DefaultMaxTimeout      = 24 * time.Hour
	DefaultTimeout         = 300 * time.Second // E2B's SDK default
	DefaultJSONBodyBytes   = 1 << 20
	DefaultTransferBytes   = 1 << 30
	DefaultProcsPerSandbox = 256
	DefaultWatchersPer     = 16
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.SandboxesPerKey, DefaultSandboxesPerKey)
	def(&l.SnapshotsPerKey, DefaultSnapshotsPerKey)
	def(&l.ProcsPerSandbox, DefaultProcsPerSandbox)
	def(&l.WatchersPer, DefaultWatchersPer)
	if l.MaxTimeout <= 0 {
		l.MaxTimeout = DefaultMaxTimeout
	}
	if l.JSONBodyBytes <= 0 {
		l.JSONBodyBytes = DefaultJSONBodyBytes
	}
	if l.TransferBytes <= 0 {
		l.TransferBytes = DefaultTransferBytes
	}
	return l
}

// Options configure the API.
type Options struct {
	Runtime *boxlite.Runtime
	// Auth names the caller of an API key (X-API-Key), or fails.
	Auth      func(key string) (string, error)
	Templates map[string]string // nil: DefaultTemplates
	StateDir  string            // the sandboxes' records
	TempDir   string            // uploads while they spool
	Limits    Limits
	Logf      func(format string, args ...any)
}

// Server is E2B's API over one runtime.
type Server struct {
	rt        *boxlite.Runtime
	auth      func(string) (string, error)
	templates map[string]string
	lim       Limits
	tmp       string
	logf      func(string, ...any)
	store     *store
	snaps     *snapStore
	control   *http.ServeMux
	envd      http.Handler

	// holders is held (read) while a sandbox is cloned from a snapshot's
	// holder, and (write) while a holder is removed.
	holders sync.RWMutex

	mu    sync.Mutex
	live  map[string]*sandbox
	stop  chan struct{}
	wg    sync.WaitGroup
	close sync.Once
}

// New makes the API; Close stops its timers (sandboxes run on, and the
// next server on the same StateDir enforces their timeouts).
func New(o Options) (*Server, error) {
	if o.Runtime == nil || o.Auth == nil || o.StateDir == "" || o.TempDir == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "e2b: Runtime, Auth, StateDir and TempDir are required")
	}
	if o.Templates == nil {
		o.Templates = DefaultTemplates
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	st, err := openStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	snaps, err := openSnapStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{rt: o.Runtime, auth: o.Auth, templates: o.Templates, lim: o.Limits.withDefaults(), tmp: o.TempDir,
		logf: o.Logf, store: st, snaps: snaps, live: map[string]*sandbox{}, stop: make(chan struct{})}
	s.control = s.controlMux()
	s.envd = s.envdHandler()
	s.wg.Add(1)
	go s.janitor()
	return s, nil
}

// Close stops the timers and the sandboxes' watchers and interpreters.
func (s *Server) Close() {
	s.close.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.mu.Lock()
		live := s.live
		s.live = map[string]*sandbox{}
		s.mu.Unlock()
		for id, sb := range live {
			// The next server on this state adopts the processes, which
			// run on detached when this one's streams end (adopt.go).
			if procs := sb.procInfos(); len(procs) > 0 {
				s.store.update(id, func(rec *record) { rec.Procs = procs })
			}
			sb.shutdown()
		}
	})
}

// Wants reports whether a request is E2B's: under Prefix, or bound for a
// sandbox (E2b-Sandbox-Id).
func Wants(r *http.Request) bool {
	return r.Header.Get("E2b-Sandbox-Id") != "" || r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/")
}

// ServeHTTP serves a request Wants.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("E2b-Sandbox-Id") != "" {
		s.envd.ServeHTTP(w, r)
		return
	}
	s.control.ServeHTTP(w, r)
}

// janitor ends the sandboxes whose timeout passed.
func (s *Server) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for _, rec := range s.store.expired(time.Now()) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if rec.AutoPause {
				s.logf("e2b: sandbox %s reached its timeout (%s): pausing it (autoPause)", rec.ID, rec.EndAt.Format(time.RFC3339))
				err := s.pauseSandbox(ctx, rec.ID)
				cancel()
				if err == nil {
					continue
				}
				s.logf("e2b: pausing sandbox %s at its timeout: %v; killing it", rec.ID, err)
				ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
			} else {
				s.logf("e2b: sandbox %s reached its timeout (%s): killing it", rec.ID, rec.EndAt.Format(time.RFC3339))
			}
			if err := s.kill(ctx, rec.ID); err != nil {
				s.logf("e2b: killing sandbox %s at its timeout: %v", rec.ID, err)
			}
			cancel()
		}
	}
}

// kill removes a sandbox's box and forgets it.
func (s *Server) kill(ctx context.Context, id string) error {
	s.mu.Lock()
	sb := s.live[id]
	delete(s.live, id)
	s.mu.Unlock()
	if sb != nil {
		sb.shutdown()
	}
	err := s.rt.Remove(ctx, id, true)
	if errors.Is(err, errdefs.ErrNotFound) {
		err = nil
	}
	if err == nil {
		s.store.remove(id)
	}
	return err
}

// sandbox is the live side of a sandbox: its box, processes, watchers and
// interpreter.
func (s *Server) sandbox(ctx context.Context, id string) (*sandbox, record, error) {
	rec, ok := s.store.get(id)
	if !ok {
		return nil, record{}, errdefs.Errorf(errdefs.ErrNotFound, "sandbox %q not found", truncate(id))
	}
	s.mu.Lock()
	if sb := s.live[id]; sb != nil {
		s.mu.Unlock()
		return sb, rec, nil
	}
	b, err := s.rt.Get(ctx, id)
	if err != nil {
		s.mu.Unlock()
		return nil, rec, err
	}
	sb := newSandbox(s, b)
	s.live[id] = sb
	s.mu.Unlock()
	if len(rec.Procs) > 0 && b.State() == boxlite.StateRunning {
		// The processes its memory runs that no server holds (adopt.go).
		procs := rec.Procs
		rec, _ = s.store.update(id, func(rec *record) { rec.Procs = nil })
		s.adopt(ctx, sb, procs)
	}
	return sb, rec, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
