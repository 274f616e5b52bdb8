// Package codeinterp serves E2B's code interpreter API (what E2B's
// sandboxes serve on port 49999, and the e2b-code-interpreter SDKs call)
// over a box's code contexts (boxlite.CodeContext):
//
//	POST   /execute               {code, context_id?, language?, env_vars?}: an NDJSON stream
//	POST   /contexts              {language?, cwd?}: {id, language, cwd}
//	GET    /contexts              [{id, language, cwd}]
//	POST   /contexts/{id}/restart
//	DELETE /contexts/{id}
//	GET    /health
//
// The stream of /execute is the one E2B's server writes (template/server
// in e2b-dev/code-interpreter) and its SDKs parse: one JSON object a line,
// {"type": "number_of_executions", "execution_count"}, then "stdout" and
// "stderr" {text, timestamp}, "result" {text, html, markdown, svg, png,
// jpeg, pdf, latex, json, javascript, data, chart, extra, is_main_result},
// "error" {name, value, traceback} and "keepalive" lines in the order the
// cell made them, and {"type": "end_of_execution"} last. A client that goes
// away interrupts the cell; one that reads too slowly (a write blocked for
// writeTimeout) is treated as gone. Output waits for the client in a
// bounded queue: a slow client never grows the server's memory.
//
// Every box has a default context per language, started on first use:
// python and javascript are listed from the start, as E2B's server does.
// A context started without a cwd starts in DefaultCwd, E2B's.
package codeinterp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

const (
	// maxBody bounds a request's body; code is at most that.
	maxBody = 16 << 20
	// maxContexts bounds the contexts of a box (each an interpreter).
	maxContexts = 64
	// writeTimeout is how long one line may wait for the client.
	writeTimeout = 60 * time.Second
	// keepaliveEvery writes a keepalive line to an idle stream, so a
	// client that went away is noticed (and its cell interrupted).
	keepaliveEvery = 5 * time.Second
	// startTimeout bounds starting a context's interpreter.
	startTimeout = 5 * time.Minute
)

// DefaultCwd is where a context starts unless told: E2B's sandboxes' user's
// home. It is made (mkdir -p, as the box's user) when the first context
// starts; a box where that fails starts its contexts in its working
// directory instead.
const DefaultCwd = "/home/user"

// Interp is the code interpreter of one box, an http.Handler.
type Interp struct {
	b *boxlite.Box

	mu       sync.Mutex
	contexts map[string]*codeCtx
	order    []string          // ids, in the order of creation
	defaults map[string]string // language -> its default context's id
	closed   bool

	homeMu sync.Mutex
	home   string // DefaultCwd once made, "" after it could not be
	homeOK bool   // tried
}

// codeCtx is a context: its interpreter starts on first use.
type codeCtx struct {
	id, lang, cwd string

	mu  sync.Mutex // held while starting
	cc  *boxlite.CodeContext
	err error // the start failed (tried again on next use)
}

// New serves b's code contexts. Close ends them.
func New(b *boxlite.Box) *Interp {
	h := &Interp{b: b, contexts: map[string]*codeCtx{}, defaults: map[string]string{}}
	for _, lang := range []string{boxlite.LanguagePython, boxlite.LanguageJavaScript} {
		h.addDefault(lang)
	}
	return h
}

// Close stops every context's interpreter.
func (h *Interp) Close() error {
	h.mu.Lock()
	h.closed = true
	all := h.contexts
	h.contexts, h.order = map[string]*codeCtx{}, nil
	h.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	return nil
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// addDefault makes a default context of lang; callers hold h.mu or own h.
func (h *Interp) addDefault(lang string) *codeCtx {
	c := &codeCtx{id: newID(), lang: lang}
	h.contexts[c.id] = c
	h.order = append(h.order, c.id)
	h.defaults[lang] = c.id
	return c
}

// defaultCwd is DefaultCwd, made on first use, or "" (the box's working
// directory) where it cannot be made.
func (h *Interp) defaultCwd(ctx context.Context) string {
	h.homeMu.Lock()
	defer h.homeMu.Unlock()
	if !h.homeOK {
		ctx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		res, err := h.b.Run(ctx, boxlite.Command{Argv: []string{"mkdir", "-p", DefaultCwd}, Timeout: time.Minute, OutputLimit: 4096})
		if err != nil && ctx.Err() != nil {
			return "" // the request went away: try again on the next
		}
		h.homeOK = true
		if err == nil && res.Code == 0 {
			h.home = DefaultCwd
		}
	}
	return h.home
}

// get returns a started context.
func (c *codeCtx) get(ctx context.Context, h *Interp) (*boxlite.CodeContext, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc != nil {
		return c.cc, nil
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cwd := c.cwd
	if cwd == "" {
		cwd = h.defaultCwd(ctx)
	}
	cc, err := h.b.NewCodeContext(ctx, c.lang, boxlite.SessionOptions{Cwd: cwd})
	if err != nil {
		return nil, err
	}
	c.cc = cc
	if c.cwd == "" {
		c.cwd = cc.Cwd()
	}
	return cc, nil
}

func (c *codeCtx) close() {
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	if cc != nil {
		cc.Close()
	}
}

func (c *codeCtx) info() contextInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	cwd := c.cwd
	if cwd == "" {
		cwd = DefaultCwd // where it will start (or the box's working directory, if that cannot be made)
	}
	return contextInfo{ID: c.id, Language: c.lang, Cwd: cwd}
}

type contextInfo struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (h *Interp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/health":
		if !method(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, "OK")
	case path == "/execute":
		if method(w, r, http.MethodPost) {
			h.execute(w, r)
		}
	case path == "/contexts":
		switch r.Method {
		case http.MethodGet:
			h.list(w)
		case http.MethodPost:
			h.create(w, r)
		default:
			w.Header().Set("Allow", "GET, POST")
			fail(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
		}
	case strings.HasPrefix(path, "/contexts/"):
		rest := strings.TrimPrefix(path, "/contexts/")
		if id, ok := strings.CutSuffix(rest, "/restart"); ok && !strings.Contains(id, "/") {
			if method(w, r, http.MethodPost) {
				h.restart(w, r, id)
			}
		} else if !strings.Contains(rest, "/") {
			if method(w, r, http.MethodDelete) {
				h.remove(w, rest)
			}
		} else {
			fail(w, http.StatusNotFound, "not found")
		}
	default:
		fail(w, http.StatusNotFound, "not found")
	}
}

func method(w http.ResponseWriter, r *http.Request, m string) bool {
	if r.Method == m {
		return true
	}
	w.Header().Set("Allow", m)
	fail(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	return false
}

// fail answers with a plain-text message, as E2B's server does.
func fail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, format, args...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// errStatus is the HTTP status of a context's failure: 400 for a bad
// option, else 500, as E2B's server answers a context it cannot start (a
// 404 would read as "no such context" to E2B's SDKs).
func errStatus(err error) int {
	if errors.Is(err, errdefs.ErrInvalidArgument) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// decode reads a bounded JSON body into v; unknown fields are errors.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == io.EOF {
		err = nil // no body: every field is optional but /execute's code
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", maxBody)
		} else {
			fail(w, http.StatusBadRequest, "invalid request body: %v", err)
		}
		return false
	}
	return true
}

func (h *Interp) lookup(id string) (*codeCtx, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.contexts[id]
	return c, ok
}

func (h *Interp) list(w http.ResponseWriter) {
	h.mu.Lock()
	cs := make([]*codeCtx, 0, len(h.order))
	for _, id := range h.order {
		cs = append(cs, h.contexts[id])
	}
	h.mu.Unlock()
	out := make([]contextInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.info())
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Interp) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Language *string `json:"language"`
		Cwd      *string `json:"cwd"`
	}
	if !decode(w, r, &req) {
		return
	}
	lang, err := boxlite.NormalizeLanguage(deref(req.Language))
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	c := &codeCtx{id: newID(), lang: lang, cwd: deref(req.Cwd)}
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		fail(w, http.StatusServiceUnavailable, "the code interpreter is closed")
		return
	case len(h.contexts) >= maxContexts:
		h.mu.Unlock()
		fail(w, http.StatusTooManyRequests, "a sandbox has at most %d contexts: remove one first", maxContexts)
		return
	}
	h.contexts[c.id] = c // counted while it starts
	h.mu.Unlock()
	if _, err := c.get(r.Context(), h); err != nil {
		h.mu.Lock()
		delete(h.contexts, c.id)
		h.mu.Unlock()
		fail(w, errStatus(err), "failed to create the %s context: %v", lang, err)
		return
	}
	h.mu.Lock()
	if h.contexts[c.id] != c { // closed, or removed while it started
		h.mu.Unlock()
		c.close()
		fail(w, http.StatusConflict, "context %s was removed while it started", c.id)
		return
	}
	h.order = append(h.order, c.id)
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, c.info())
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (h *Interp) restart(w http.ResponseWriter, r *http.Request, id string) {
	c, ok := h.lookup(id)
	if !ok {
		fail(w, http.StatusNotFound, "Context %s not found", id)
		return
	}
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	if cc != nil { // one never started has nothing to forget
		ctx, cancel := context.WithTimeout(r.Context(), startTimeout)
		defer cancel()
		if err := cc.Restart(ctx); err != nil {
			fail(w, errStatus(err), "Failed to restart context %s: %v", id, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, nil)
}

func (h *Interp) remove(w http.ResponseWriter, id string) {
	h.mu.Lock()
	c, ok := h.contexts[id]
	if ok {
		delete(h.contexts, id)
		for i, o := range h.order {
			if o == id {
				h.order = append(h.order[:i:i], h.order[i+1:]...)
				break
			}
		}
		if h.defaults[c.lang] == id {
			delete(h.defaults, c.lang) // the language's next default is a new one
		}
	}
	h.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "Context %s not found", id)
		return
	}
	c.close()
	writeJSON(w, http.StatusOK, nil)
}
