package restapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// Idempotency keys (BoxLite's `Idempotency-Key` header on create, remove,
// start, stop, exec, signal and image pull): a retried request with the same key and
// the same request gets the first one's answer, replayed, instead of
// running again. Answers are kept per caller for IdempotencyLifetime, in
// StateDir/idempotency (one file each, named by a hash: no key reaches a
// path), so a retry after a restart of the server is still recognised.
const (
	IdempotencyHeader   = "Idempotency-Key"
	IdempotencyLifetime = 24 * time.Hour
	// idemKeyMax bounds a key's length; idemPerCaller the answers kept per
	// caller (a caller past it gets 429 until old ones expire);
	// idemBodyMax the answer kept (larger ones are not kept: the key then
	// protects nothing, and the retry runs again).
	idemKeyMax    = 255
	idemPerCaller = 10000
	idemBodyMax   = 64 << 10
)

// idemLifetimeISO is IdempotencyLifetime for /v1/config.
const idemLifetimeISO = "PT24H"

// idemAnswer is a kept answer (or, while Done is false, a request running).
type idemAnswer struct {
	Caller      string    `json:"caller"`
	Fingerprint string    `json:"fingerprint"` // the request's hash
	Status      int       `json:"status"`
	Location    string    `json:"location,omitempty"`
	ContentType string    `json:"content_type,omitempty"`
	Body        []byte    `json:"body,omitempty"`
	At          time.Time `json:"at"`
	Done        bool      `json:"-"`
}

type idemStore struct {
	mu  sync.Mutex
	dir string
	m   map[string]*idemAnswer // file name (hash of caller and key) -> answer
	per map[string]int         // caller -> answers kept or running
}

func openIdemStore(stateDir string) (*idemStore, error) {
	dir := filepath.Join(stateDir, "idempotency")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &idemStore{dir: dir, m: map[string]*idemAnswer{}, per: map[string]int{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name := e.Name()
		data, err := os.ReadFile(filepath.Join(dir, name))
		var a idemAnswer
		if len(name) != 64 || !e.Type().IsRegular() || err != nil || len(data) > 2*idemBodyMax+4096 ||
			json.Unmarshal(data, &a) != nil || time.Since(a.At) > IdempotencyLifetime {
			os.Remove(filepath.Join(dir, name)) // expired, torn or not ours
			continue
		}
		a.Done = true
		s.m[name] = &a
		s.per[a.Caller]++
	}
	return s, nil
}

// idemName is the file (and map) name of a caller's key.
func idemName(caller, key string) string {
	h := sha256.Sum256([]byte(caller + "\x00" + key))
	return hex.EncodeToString(h[:])
}

// checkIdemKey refuses a key outside 1-255 visible ASCII characters.
func checkIdemKey(k string) error {
	if len(k) == 0 || len(k) > idemKeyMax {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: 1-%d characters, got %d", IdempotencyHeader, idemKeyMax, len(k))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: visible ASCII characters only", IdempotencyHeader)
		}
	}
	return nil
}

// begin claims a caller's key for a request with fingerprint fp: it
// returns the kept answer to replay, or nil and the claim to finish.
func (s *idemStore) begin(caller, key, fp string) (*idemAnswer, error) {
	name := idemName(caller, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.m[name]; ok && time.Since(a.At) > IdempotencyLifetime && a.Done {
		s.dropLocked(name)
	}
	if a, ok := s.m[name]; ok {
		switch {
		case !a.Done:
			return nil, errdefs.Errorf(errdefs.ErrInvalidState, "a request with this %s is still running; retry when it has answered", IdempotencyHeader)
		case a.Fingerprint != fp:
			return nil, newError(errIdemReused, "this %s was used for a different request (method, path, query or body) in the last %s", IdempotencyHeader, IdempotencyLifetime)
		}
		return a, nil
	}
	if s.per[caller] >= idemPerCaller {
		s.pruneLocked()
		if s.per[caller] >= idemPerCaller {
			return nil, newError(errQuota, "%d %s answers are kept for this key already; they expire %s after their request", idemPerCaller, IdempotencyHeader, IdempotencyLifetime)
		}
	}
	s.m[name] = &idemAnswer{Caller: caller, Fingerprint: fp, At: time.Now()}
	s.per[caller]++
	return nil, nil
}

// finish keeps a request's answer (a 5xx or an answer too large to keep
// frees the key instead, so that a retry runs again).
func (s *idemStore) finish(caller, key string, rec *idemRecorder) {
	name := idemName(caller, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[name]
	if !ok {
		return
	}
	if rec.status >= 500 || rec.status == 0 || rec.over {
		s.dropLocked(name)
		return
	}
	a.Status, a.Location, a.ContentType, a.Body = rec.status, rec.Header().Get("Location"), rec.Header().Get("Content-Type"), rec.body.Bytes()
	a.At, a.Done = time.Now(), true
	// An answer that cannot be written down still holds in memory, until
	// the server restarts.
	if data, err := json.Marshal(a); err == nil {
		tmp := filepath.Join(s.dir, "."+name+".tmp")
		if os.WriteFile(tmp, data, 0o600) == nil {
			os.Rename(tmp, filepath.Join(s.dir, name))
		}
	}
}

func (s *idemStore) dropLocked(name string) {
	if a, ok := s.m[name]; ok {
		s.per[a.Caller]--
		if s.per[a.Caller] <= 0 {
			delete(s.per, a.Caller)
		}
		delete(s.m, name)
		os.Remove(filepath.Join(s.dir, name))
	}
}

func (s *idemStore) pruneLocked() {
	for name, a := range s.m {
		if a.Done && time.Since(a.At) > IdempotencyLifetime {
			s.dropLocked(name)
		}
	}
}

// idemRecorder writes an answer through and keeps a copy of it.
type idemRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool
}

func (r *idemRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *idemRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if !r.over {
		if r.body.Len()+len(p) > idemBodyMax {
			r.over = true
			r.body.Reset()
		} else {
			r.body.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

// idempotent serves a request of an idempotent route: without the header
// it runs as any other; with it, it runs once per caller, key and request.
func (a *API) idempotent(w http.ResponseWriter, r *http.Request, run func(http.ResponseWriter, *http.Request)) error {
	key := r.Header.Get(IdempotencyHeader)
	if len(r.Header.Values(IdempotencyHeader)) == 0 {
		run(w, r)
		return nil
	}
	if len(r.Header.Values(IdempotencyHeader)) > 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s given more than once", IdempotencyHeader)
	}
	if err := checkIdemKey(key); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.lim.JSONBodyBytes))
	if err != nil {
		if _, ok := err.(*http.MaxBytesError); ok {
			return TooLarge(fmt.Sprintf("request body over %d bytes", a.lim.JSONBodyBytes))
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", r.Method, r.URL.Path, r.URL.Query().Encode(), strings.TrimSpace(r.Header.Get("Content-Type")))
	h.Write(body)
	fp := hex.EncodeToString(h.Sum(nil))
	who := caller(r)
	kept, err := a.idem.begin(who, key, fp)
	if err != nil {
		return err
	}
	if kept != nil {
		if kept.Location != "" {
			w.Header().Set("Location", kept.Location)
		}
		if kept.ContentType != "" {
			w.Header().Set("Content-Type", kept.ContentType)
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(kept.Status)
		w.Write(kept.Body)
		return nil
	}
	rec := &idemRecorder{ResponseWriter: w}
	defer a.idem.finish(who, key, rec)
	run(rec, r)
	return nil
}
