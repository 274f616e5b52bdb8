package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

type executeRequest struct {
	Code      *string           `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (h *Interp) execute(w http.ResponseWriter, r *http.Request) {
	var req executeRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Code == nil {
		fail(w, http.StatusBadRequest, "code is required")
		return
	}
	id, lang := deref(req.ContextID), deref(req.Language)
	if id != "" && lang != "" {
		fail(w, http.StatusBadRequest, "Only one of context_id or language can be provided")
		return
	}
	var c *codeCtx
	if id != "" {
		var ok bool
		if c, ok = h.lookup(id); !ok {
			fail(w, http.StatusNotFound, "Context %s not found", id)
			return
		}
	} else {
		l, err := boxlite.NormalizeLanguage(lang)
		if err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			fail(w, http.StatusServiceUnavailable, "the code interpreter is closed")
			return
		}
		c = h.contexts[h.defaults[l]]
		if c == nil {
			if len(h.contexts) >= maxContexts {
				h.mu.Unlock()
				fail(w, http.StatusTooManyRequests, "a sandbox has at most %d contexts: remove one first", maxContexts)
				return
			}
			c = h.addDefault(l)
		}
		h.mu.Unlock()
	}
	cc, err := c.get(r.Context(), h)
	if err != nil {
		fail(w, errStatus(err), "failed to start the %s context: %v", c.lang, err)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s := &stream{w: w, rc: http.NewResponseController(w), cancel: cancel, last: time.Now()}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	s.flush()
	stopKeepalive := s.keepalive()
	ex, err := cc.RunCode(ctx, *req.Code, &boxlite.RunCodeOptions{
		Env:        req.EnvVars,
		OnStdout:   func(t string) { s.output("stdout", t) },
		OnStderr:   func(t string) { s.output("stderr", t) },
		OnResult:   func(res boxlite.CodeResult) { s.line(resultLine(res)) },
		StreamOnly: true,
	})
	stopKeepalive()
	if ex != nil && ex.Error != nil {
		s.line(map[string]any{"type": "error", "name": ex.Error.Name, "value": ex.Error.Value, "traceback": ex.Error.Traceback})
	}
	switch {
	case err == nil:
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrLimit):
		s.line(map[string]any{"type": "error", "name": "InvalidRequest", "value": err.Error(), "traceback": ""})
	case errors.Is(err, errdefs.ErrClosed):
		s.line(map[string]any{"type": "error", "name": "ContextRestarting", "value": "Context was restarted", "traceback": ""})
	case ctx.Err() != nil && ex != nil && ex.Error != nil:
		// the client went away, and the interrupt ended the cell: said above
	default:
		s.line(map[string]any{"type": "error", "name": "UnexpectedEndOfExecution", "value": err.Error(), "traceback": ""})
	}
	if ex != nil {
		s.line(map[string]any{"type": "number_of_executions", "execution_count": ex.ExecutionCount})
	}
	s.line(map[string]any{"type": "end_of_execution"})
}

// resultLine is a result as E2B's server sends it: the well-known MIME
// types as fields, the others in extra.
func resultLine(r boxlite.CodeResult) map[string]any {
	m := map[string]any{"type": "result", "is_main_result": r.IsMain}
	extra := map[string]any{}
	for k, v := range r.Data {
		switch k {
		case "text/plain":
			// E2B's server takes the quotes off a string's repr
			if len(v) >= 2 && (v[0] == '\'' && v[len(v)-1] == '\'' || v[0] == '"' && v[len(v)-1] == '"') {
				v = v[1 : len(v)-1]
			}
			m["text"] = v
		case "application/json":
			m["json"] = json.RawMessage(v) // checked JSON (internal/session)
		default:
			if f, ok := resultFields[k]; ok {
				m[f] = v
			} else {
				extra[k] = v
			}
		}
	}
	m["extra"] = extra
	return m
}

// resultFields are the result fields E2B's SDKs read, by MIME type (the
// rest go in extra); text/plain and application/json are converted.
var resultFields = map[string]string{
	"text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg", "image/png": "png",
	"image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
	"application/javascript": "javascript", "e2b/data": "data", "e2b/chart": "chart",
}

// stream writes the NDJSON lines of one execution; a line the client does
// not take within writeTimeout ends it (and interrupts the cell).
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc

	mu     sync.Mutex
	broken bool
	last   time.Time // of the last line
}

func (s *stream) output(kind, text string) {
	s.line(map[string]any{"type": kind, "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
}

func (s *stream) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"type": "error", "name": "EncodingError", "value": err.Error(), "traceback": ""})
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return
	}
	s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // ErrNotSupported: the server's own timeouts
	_, err = s.w.Write(b)
	if err == nil {
		err = s.rc.Flush()
	}
	s.last = time.Now()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.broken = true
		s.cancel()
	}
}

func (s *stream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rc.Flush()
}

// keepalive writes a keepalive line whenever the stream was quiet for
// keepaliveEvery, until the returned func is called.
func (s *stream) keepalive() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(keepaliveEvery / 5)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s.mu.Lock()
			quiet := time.Since(s.last) >= keepaliveEvery
			s.mu.Unlock()
			if quiet {
				s.line(map[string]string{"type": "keepalive"})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
