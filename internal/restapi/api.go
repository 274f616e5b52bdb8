// Package restapi serves BoxLite's REST API (its openapi/box.openapi.yaml:
// same paths, verbs, JSON field names, status codes and error bodies) over
// a boxlite.Runtime, for `boxlite serve`. The route table (routes.go) is
// the one description of the API: the mux, authentication and the served
// OpenAPI document (schema.go) all come from it and from the wire types (package wire).
//
// Everything in a request is the network's: bodies are decoded strictly
// within a bound, ids and names are checked before they reach the runtime
// (which resolves them in its own registry, never as paths), uploads and
// downloads are streamed as tar archives re-encoded entry by entry within
// caps, and an execution's output reaches its client through one bounded
// chunk per stream, so a slow or absent client holds the process back
// (the box's own pipes fill) instead of growing this server.
package restapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// Authenticator names the caller of a request (a key's name), or fails
// with an error Unauthenticated made.
type Authenticator interface {
	Authenticate(r *http.Request) (caller string, err error)
}

// Limits bound what one caller may hold and what one request may carry.
// Zero fields take the defaults below.
type Limits struct {
	BoxesPerKey     int           // boxes a key's requests created that still exist
	MemoryMiBPerKey int           // the memory those boxes were given
	ExecsPerKey     int           // executions of a key still running
	JSONBodyBytes   int64         // a JSON request body
	TransferBytes   int64         // an upload, a download's file data, an import
	ExecRetention   time.Duration // how long an ended execution's status and unread output are kept
	ExecIdle        time.Duration // how long a running execution may go without a client before it is killed
	RequestTimeout  time.Duration // a request's deadline, transfers and attaches excepted
	TransferTimeout time.Duration // an upload's, a download's, an export's or an import's deadline
}

// Default limits.
const (
	DefaultBoxesPerKey     = 50
	DefaultMemoryMiBPerKey = 64 << 10
	DefaultExecsPerKey     = 256
	DefaultJSONBodyBytes   = 1 << 20
	DefaultTransferBytes   = 1 << 30
	DefaultExecRetention   = 5 * time.Minute
	DefaultExecIdle        = 30 * time.Minute
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultTransferTimeout = time.Hour
)

func (l Limits) withDefaults() Limits {
	orDefault(&l.BoxesPerKey, DefaultBoxesPerKey)
	orDefault(&l.MemoryMiBPerKey, DefaultMemoryMiBPerKey)
	orDefault(&l.ExecsPerKey, DefaultExecsPerKey)
	orDefault(&l.JSONBodyBytes, DefaultJSONBodyBytes)
	orDefault(&l.TransferBytes, DefaultTransferBytes)
	orDefault(&l.ExecRetention, DefaultExecRetention)
	orDefault(&l.ExecIdle, DefaultExecIdle)
	orDefault(&l.RequestTimeout, DefaultRequestTimeout)
	orDefault(&l.TransferTimeout, DefaultTransferTimeout)
	return l
}

// Options configure an API.
type Options struct {
	Runtime *boxlite.Runtime
	Auth    Authenticator
	Limits  Limits
	// StateDir keeps which key created which box (for the per-key limits),
	// across restarts of the server.
	StateDir string
	// TempDir holds exports and imports while they stream.
	TempDir string
	// Logf logs a line for the operator (executions lost across a
	// restart); nil discards.
	Logf func(format string, args ...any)
}

// API is BoxLite's REST API over one runtime.
type API struct {
	rt      *boxlite.Runtime
	auth    Authenticator
	lim     Limits
	owners  *owners
	idem    *idemStore
	execs   *registry
	tmp     string
	mux     *http.ServeMux
	tunnels *tunnelBook
}

// New makes the API; Close ends its executions' bookkeeping.
func New(o Options) (*API, error) {
	if o.Runtime == nil || o.Auth == nil || o.StateDir == "" || o.TempDir == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "restapi: Runtime, Auth, StateDir and TempDir are required")
	}
	own, err := openOwners(o.StateDir)
	if err != nil {
		return nil, err
	}
	idem, err := openIdemStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	a := &API{rt: o.Runtime, auth: o.Auth, lim: o.Limits.withDefaults(), owners: own, idem: idem, tmp: o.TempDir, mux: http.NewServeMux(), tunnels: newTunnelBook()}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	store, err := openExecStore(o.StateDir, o.Logf)
	if err != nil {
		return nil, err
	}
	a.execs = newRegistry(a.lim, store)
	a.execs.restore(a.rt) // executions of a previous run of the server
	go a.execs.janitor()
	for _, rt := range routes {
		a.mux.Handle(rt.method+" /v1"+rt.path, a.handler(rt))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errdefs.Errorf(errdefs.ErrNotFound, "no route %s %s", r.Method, safePath(r.URL.Path)))
	})
	return a, nil
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Close kills nothing (executions belong to their detached boxes, and are
// detachable: they run on when this process ends, and the next API on the
// same StateDir attaches to them again) but stops the registry's janitor.
func (a *API) Close() { a.execs.close() }

// Executions is how many executions the API tracks, running or retained.
func (a *API) Executions() (running, retained int) { return a.execs.count() }

type callerKey struct{}

// caller is the key name the request was authenticated as.
func caller(r *http.Request) string {
	s, _ := r.Context().Value(callerKey{}).(string)
	return s
}

// Caller is the key name a request served by the API was authenticated
// as ("" for a public route), for the access log.
func Caller(r *http.Request) string { return caller(r) }

func (a *API) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.public {
			name, err := a.auth.Authenticate(r)
			if err != nil {
				WriteError(w, r, err)
				return
			}
			*r = *r.WithContext(context.WithValue(r.Context(), callerKey{}, name))
		}
		// An attach has no deadline: its keepalive finds a client gone.
		if rt.status != http.StatusSwitchingProtocols {
			d := a.lim.RequestTimeout
			if rt.stream {
				d = a.lim.TransferTimeout
			}
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if err := checkPathValues(r, rt.path); err != nil {
			WriteError(w, r, err)
			return
		}
		serve := func(w http.ResponseWriter, r *http.Request) {
			if err := rt.handle(a, w, r); err != nil {
				WriteError(w, r, err)
			}
		}
		if !rt.idempotent {
			serve(w, r)
		} else if err := a.idempotent(w, r, serve); err != nil {
			WriteError(w, r, err)
		}
	})
}

// idPattern is what a box id or name, a snapshot or execution id may be:
// the runtime's names are of this alphabet, and nothing else reaches it.
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)

// checkPathValues refuses a path parameter outside idPattern (image ids,
// digests, take "sha256:" too).
func checkPathValues(r *http.Request, pattern string) error {
	for _, p := range []string{"box_id", "exec_id", "snapshot_name"} {
		if strings.Contains(pattern, "{"+p+"}") {
			if v := r.PathValue(p); !idPattern.MatchString(v) {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", p, truncate(v))
			}
		}
	}
	if strings.Contains(pattern, "{image_id}") {
		if v := r.PathValue("image_id"); !digestPattern.MatchString(v) {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "image_id %q: must be a digest, sha256:<64 hex digits>", truncate(v))
		}
	}
	return nil
}

var digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func safePath(p string) string { return fmt.Sprintf("%q", truncate(p)) }

// decode reads a JSON body into v strictly: an unknown field, a second
// value or a body over the bound is a 400 (413). An empty body leaves v as
// it is when optional.
func (a *API) decode(r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			if !(optional && r.ContentLength == 0) {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: Content-Type %q, want application/json", truncate(ct))
			}
		}
	}
	body := http.MaxBytesReader(nil, r.Body, a.lim.JSONBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		if _, ok := err.(*http.MaxBytesError); ok {
			return TooLarge(fmt.Sprintf("request body over %d bytes", a.lim.JSONBodyBytes))
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: a JSON object is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: %v", err)
	}
	if dec.More() {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "request body: more than one JSON value")
	}
	return nil
}

// query reads the query parameters a route names; another is a 400.
func query(r *http.Request, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "unknown query parameter %q (this route takes %s)", truncate(k), strings.Join(append([]string{""}, allowed...)[1:], ", "))
		}
		if len(vs) != 1 {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "query parameter %q given %d times", k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

// boolParam parses a boolean query parameter.
func boolParam(q map[string]string, name string, def bool) (bool, error) {
	v, ok := q[name]
	if !ok {
		return def, nil
	}
	switch v {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errdefs.Errorf(errdefs.ErrInvalidArgument, "query parameter %s=%q: want true or false", name, truncate(v))
}

func notServed(what string) error {
	return newError(errNotServed, "%s is a BoxLite cloud feature that boxlite serve does not provide", what)
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
