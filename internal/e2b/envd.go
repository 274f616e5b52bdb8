package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/e2b/codeinterp"
	"github.com/boxlite/boxlite/internal/e2b/envd/filesystem/filesystemconnect"
	"github.com/boxlite/boxlite/internal/e2b/envd/process/processconnect"
)

// Sandbox ports: envd's and the code interpreter's.
const (
	EnvdPort   = 49983
	InterpPort = 49999
)

// maxMessage bounds one Connect message either way.
const maxMessage = 4 << 20

// sandbox is the live side of one sandbox.
type sandbox struct {
	s   *Server
	box *boxlite.Box

	mu       sync.Mutex
	procs    map[uint32]*proc
	watchers map[string]*watcher
	interp   *codeinterp.Interp
	hasBash  int // 0 unknown, 1 yes, -1 no
	closed   bool
}

func newSandbox(s *Server, b *boxlite.Box) *sandbox {
	return &sandbox{s: s, box: b, procs: map[uint32]*proc{}, watchers: map[string]*watcher{}}
}

// shutdown ends the watchers and the interpreter; processes belong to the
// box and end with it.
func (sb *sandbox) shutdown() {
	sb.mu.Lock()
	sb.closed = true
	ws := sb.watchers
	sb.watchers = map[string]*watcher{}
	in := sb.interp
	sb.interp = nil
	sb.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	if in != nil {
		in.Close()
	}
}

func (sb *sandbox) interpreter() *codeinterp.Interp {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.interp == nil {
		sb.interp = codeinterp.New(sb.box)
	}
	return sb.interp
}

type sandboxKey struct{}

func sandboxOf(ctx context.Context) *sandbox { sb, _ := ctx.Value(sandboxKey{}).(*sandbox); return sb }

// envdHandler routes a sandbox's requests by E2b-Sandbox-Id and
// E2b-Sandbox-Port, after the access token.
func (s *Server) envdHandler() http.Handler {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxMessage), connect.WithSendMaxBytes(maxMessage)}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processService{s: s}, opts...))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&fsService{s: s}, opts...))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /envs", s.envs)
	mux.HandleFunc("GET /metrics", s.envdMetrics)
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, statusErr(http.StatusNotFound, "envd has no route %s %q", r.Method, truncate(r.URL.Path)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("E2b-Sandbox-Id")
		port, err := strconv.Atoi(r.Header.Get("E2b-Sandbox-Port"))
		if r.Header.Get("E2b-Sandbox-Port") == "" {
			port, err = EnvdPort, nil
		}
		if err != nil || (port != EnvdPort && port != InterpPort) {
			writeError(w, statusErr(http.StatusNotFound, "sandbox port %q is not served: %d is envd's, %d the code interpreter's", truncate(r.Header.Get("E2b-Sandbox-Port")), EnvdPort, InterpPort))
			return
		}
		if !sandboxIDPattern.MatchString(id) {
			writeError(w, statusErr(http.StatusBadRequest, "E2b-Sandbox-Id %q: want 1-128 letters, digits, '.', '_' or '-'", truncate(id)))
			return
		}
		rec, ok := s.store.get(id)
		if !ok {
			sandboxGone(w, r, id, " (killed, or its timeout ended it)")
			return
		}
		// The sandbox URL may carry the control plane's prefix.
		if p := strings.TrimPrefix(r.URL.Path, Prefix); p != r.URL.Path && strings.HasPrefix(p, "/") {
			r.URL.Path = p
			r.URL.RawPath = ""
		}
		public := port == EnvdPort && r.Method == http.MethodGet && r.URL.Path == "/health"
		if !public && !tokenOK(r, rec.Token) && !(port == InterpPort && trafficOK(r, rec.Traffic)) {
			writeError(w, statusErr(http.StatusUnauthorized, "invalid or missing X-Access-Token (or, on port %d, E2B-Traffic-Access-Token) for sandbox %s", InterpPort, id))
			return
		}
		if rec.Paused {
			sandboxGone(w, r, id, " running: it is paused (Sandbox.connect resumes it)")
			return
		}
		sb, _, err := s.sandbox(r.Context(), id)
		if errors.Is(err, errdefs.ErrNotFound) {
			sandboxGone(w, r, id, " (its box is gone)")
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), sandboxKey{}, sb))
		if port == InterpPort {
			sb.interpreter().ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// tokenOK checks the sandbox's access token: the X-Access-Token header,
// or a file URL's signature (E2B's v1: sha256 of path:operation:user:token
// [:expiration]).
func tokenOK(r *http.Request, token string) bool {
	if t := r.Header.Get("X-Access-Token"); t != "" {
		return subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" || r.URL.Path != "/files" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// trafficOK checks the sandbox's traffic access token, which opens the
// code interpreter's port (not envd's): E2B's code interpreter SDKs send
// X-Access-Token on /execute only, E2B-Traffic-Access-Token on every call.
func trafficOK(r *http.Request, token string) bool {
	t := r.Header.Get("E2B-Traffic-Access-Token")
	return token != "" && t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1
}

// envs is the sandbox's environment variables (those it was created with).
func (s *Server) envs(w http.ResponseWriter, r *http.Request) {
	rec, _ := s.store.get(sandboxOf(r.Context()).box.ID())
	env := rec.EnvVars
	if env == nil {
		env = map[string]string{}
	}
	writeJSON(w, http.StatusOK, env)
}

// envdMetrics is envd's /metrics: the VMM's figures.
func (s *Server) envdMetrics(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	rec, _ := s.store.get(sb.box.ID())
	m := map[string]any{"ts": time.Now().Unix(), "cpu_count": rec.CPUs, "cpu_used_pct": 0.0, "mem_total": int64(rec.MemoryMiB) << 20,
		"mem_used": 0, "disk_total": int64(rec.DiskGB) << 30, "disk_used": 0}
	if bm, err := sb.box.Metrics(r.Context()); err == nil {
		if bm.CPUPercent != nil && rec.CPUs > 0 {
			m["cpu_used_pct"] = *bm.CPUPercent / float64(rec.CPUs)
		}
		if bm.MemoryBytes != nil {
			m["mem_used"] = *bm.MemoryBytes
		}
	}
	writeJSON(w, http.StatusOK, m)
}
