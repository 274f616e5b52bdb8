package e2b

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// EnvdVersion is the envd version sandboxes report: E2B's SDKs gate
// features on it. 0.5.7 has CloseStdin, recursive watches and octet-stream
// uploads, and not file metadata nor event entries, which are not served.
const EnvdVersion = "0.5.7"

// clientID is what E2B's API names the node a sandbox runs on.
const clientID = "boxlite"

type ctxKey struct{}

// caller is the API key's name a control request was authenticated as.
func caller(r *http.Request) string { s, _ := r.Context().Value(ctxKey{}).(string); return s }

var sandboxIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)

func (s *Server) controlMux() *http.ServeMux {
	mux := http.NewServeMux()
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, err := s.auth(r.Header.Get("X-API-Key"))
			if err != nil {
				writeError(w, statusErr(http.StatusUnauthorized, "invalid or missing API key: send X-API-Key: <a boxlite serve key>"))
				return
			}
			if id := r.PathValue("id"); strings.Contains(pattern, "{id}") && !sandboxIDPattern.MatchString(id) {
				writeError(w, statusErr(http.StatusBadRequest, "sandbox id %q: want 1-128 letters, digits, '.', '_' or '-'", truncate(id)))
				return
			}
			ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), ctxKey{}, name), 10*time.Minute)
			defer cancel()
			if err := f(w, r.WithContext(ctx)); err != nil {
				writeError(w, err)
			}
		}))
	}
	p := Prefix
	h("POST "+p+"/sandboxes", s.create)
	h("POST "+p+"/v2/sandboxes", s.create)
	h("GET "+p+"/sandboxes", s.listV1)
	h("GET "+p+"/v2/sandboxes", s.listV2)
	h("GET "+p+"/sandboxes/{id}", s.get)
	h("DELETE "+p+"/sandboxes/{id}", s.killSandbox)
	h("POST "+p+"/sandboxes/{id}/timeout", s.setTimeout)
	h("POST "+p+"/sandboxes/{id}/refreshes", s.refresh)
	h("POST "+p+"/sandboxes/{id}/connect", s.connect)
	h("POST "+p+"/v2/sandboxes/{id}/connect", s.connect)
	h("POST "+p+"/sandboxes/{id}/resume", s.resume)
	h("POST "+p+"/sandboxes/{id}/pause", s.pause)
	h("POST "+p+"/sandboxes/{id}/fork", s.fork)
	h("PUT "+p+"/sandboxes/{id}/network", s.updateNetwork)
	h("GET "+p+"/sandboxes/{id}/metrics", s.metrics)
	h("GET "+p+"/sandboxes/{id}/logs", s.logsV1)
	h("GET "+p+"/v2/sandboxes/{id}/logs", s.logsV2)
	h("POST "+p+"/sandboxes/{id}/snapshots", s.createSnapshot)
	h("GET "+p+"/snapshots", s.listSnapshots)
	h("DELETE "+p+"/templates/{template}", s.deleteTemplate)
	for _, nr := range []struct{ route, what string }{
		{"GET " + p + "/sandboxes/metrics", "metrics of many sandboxes"},
		{p + "/templates", "template building (templates are local images: docs/e2b.md)"},
		{p + "/templates/", "template building (templates are local images: docs/e2b.md)"},
		{p + "/v2/templates", "template building"},
		{p + "/v2/templates/", "template building"},
		{p + "/v3/templates", "template building"},
		{p + "/volumes", "volumes"},
		{p + "/volumes/", "volumes"},
		{p + "/secrets", "secrets"},
		{p + "/secrets/", "secrets"},
	} {
		what := nr.what
		h(nr.route, func(w http.ResponseWriter, r *http.Request) error { return notServed(what) })
	}
	mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, statusErr(http.StatusNotFound, "no E2B route %s %q", r.Method, truncate(r.URL.Path)))
	})
	return mux
}

// decode reads a JSON body strictly within the bound; empty is allowed
// when optional.
func (s *Server) decode(r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return statusErr(http.StatusBadRequest, "Content-Type %q: want application/json", truncate(ct))
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.lim.JSONBodyBytes))
	if err != nil {
		if _, ok := err.(*http.MaxBytesError); ok {
			return statusErr(http.StatusRequestEntityTooLarge, "request body over %d bytes", s.lim.JSONBodyBytes)
		}
		return statusErr(http.StatusBadRequest, "request body: %v", err)
	}
	if strings.TrimSpace(string(data)) == "" {
		if optional {
			return nil
		}
		return statusErr(http.StatusBadRequest, "a JSON body is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return statusErr(http.StatusBadRequest, "request body: %v", err)
	}
	if dec.More() {
		return statusErr(http.StatusBadRequest, "request body: more than one JSON value")
	}
	return nil
}

// networkConfig is E2B's sandbox network options.
type networkConfig struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	DNSServers         []string        `json:"dnsServers"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
	MaskRequestHost    *string         `json:"maskRequestHost"`
	HTTPSPorts         []int           `json:"httpsPorts"`
	Rules              json.RawMessage `json:"rules"`
}

// createRequest is E2B's create body, v1 (secure) and v2.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     json.RawMessage   `json:"autoPauseMemory"`
	AutoResume          json.RawMessage   `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	MCP                 json.RawMessage   `json:"mcp"`
	IAM                 json.RawMessage   `json:"iam"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
}

func isNull(m json.RawMessage) bool {
	t := strings.TrimSpace(string(m))
	return t == "" || t == "null" || t == "{}" || t == "[]"
}

// timeoutOf checks a timeout in seconds.
func (s *Server) timeoutOf(v *int, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	d := time.Duration(*v) * time.Second
	if *v < 0 || d > s.lim.MaxTimeout {
		return 0, statusErr(http.StatusBadRequest, "timeout %d: want 0 to %d seconds", *v, int(s.lim.MaxTimeout.Seconds()))
	}
	return d, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

func (s *Server) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := s.decode(r, &req, false); err != nil {
		return err
	}
	switch {
	case !isNull(req.MCP):
		return notServed("mcp")
	case !isNull(req.IAM):
		return notServed("iam")
	case !isNull(req.VolumeMounts):
		return notServed("volumeMounts")
	case !isNull(req.AutoPauseMemory):
		return notServed("autoPauseMemory")
	case strings.TrimSpace(string(req.AutoResume)) != "" && strings.TrimSpace(string(req.AutoResume)) != "null" && !strings.Contains(string(req.AutoResume), "false") && !isNull(req.AutoResume):
		return notServed("autoResume")
	}
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	key := caller(r)
	var snap *snapshot // the snapshot the sandbox starts from, if any
	image, ok := s.templates[req.TemplateID]
	if !ok {
		sn, found := s.snaps.resolve(key, req.TemplateID)
		if !snapshotRefPattern.MatchString(req.TemplateID) || !found {
			return statusErr(http.StatusNotFound, "template %q not found: not in this server's template table (docs/e2b.md) nor a snapshot of this key's", truncate(req.TemplateID))
		}
		snap, image = &sn, sn.Image
	}
	timeout, err := s.timeoutOf(req.Timeout, DefaultTimeout)
	if err != nil {
		return err
	}
	if len(req.Metadata) > 64 {
		return statusErr(http.StatusBadRequest, "metadata: at most 64 entries")
	}
	for k, v := range req.Metadata {
		if len(k) > 256 || len(v) > 4096 {
			return statusErr(http.StatusBadRequest, "metadata %q: keys up to 256 bytes, values up to 4096", truncate(k))
		}
	}
	opts := []boxlite.BoxOption{boxlite.WithDetach(), boxlite.WithAutoRemove(false)}
	if len(req.EnvVars) > 256 {
		return statusErr(http.StatusBadRequest, "envVars: at most 256")
	}
	for k, v := range req.EnvVars {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) || len(v) > 32<<10 {
			return statusErr(http.StatusBadRequest, "envVars %q: want a variable name and a value without NUL, up to 32 KiB", truncate(k))
		}
		opts = append(opts, boxlite.WithEnv(k, v))
	}
	spec, err := network(req.AllowInternetAccess, req.Network)
	if err != nil {
		return err
	}
	opts = append(opts, boxlite.WithNetwork(spec))
	if s.store.count(key) >= s.lim.SandboxesPerKey {
		return statusErr(http.StatusTooManyRequests, "key %q has %d sandboxes, its limit", key, s.lim.SandboxesPerKey)
	}
	var b *boxlite.Box
	envVars := req.EnvVars
	if snap != nil {
		// A clone of the snapshot's holder: the source's configuration,
		// paused at the snapshot's instant; Start resumes it.
		if b, err = s.fromSnapshot(r.Context(), *snap); err != nil {
			return err
		}
		envVars = maps.Clone(snap.EnvVars)
		if envVars == nil && len(req.EnvVars) > 0 {
			envVars = map[string]string{}
		}
		maps.Copy(envVars, req.EnvVars) // added to every process's environment (envd.go)
	} else if b, err = s.rt.Create(r.Context(), image, opts...); err != nil {
		return createErr(req.TemplateID, image, err)
	}
	if err := b.Start(r.Context()); err != nil {
		b.Remove(context.WithoutCancel(r.Context()), true)
		return createErr(req.TemplateID, image, err)
	}
	if snap != nil && (req.AllowInternetAccess != nil || req.Network != nil) {
		// The snapshot's network, as asked at create.
		if err := b.UpdateOutbound(r.Context(), spec.Mode, spec.AllowNet); err != nil {
			b.Remove(context.WithoutCancel(r.Context()), true)
			return err
		}
	}
	info := b.Info()
	now := time.Now().UTC()
	if snap != nil {
		req.TemplateID = snap.ref()
	}
	rec := record{ID: b.ID(), TemplateID: req.TemplateID, Image: image, Key: key, Metadata: req.Metadata, EnvVars: envVars,
		Token: newToken(), Traffic: newToken(), StartedAt: now, EndAt: now.Add(timeout), CPUs: info.Config.CPUs, MemoryMiB: info.Config.MemoryMiB, DiskGB: info.Config.DiskSizeGB,
		AutoPause: req.AutoPause != nil && *req.AutoPause}
	if snap != nil {
		rec.Procs = snap.Procs
	}
	s.store.put(rec)
	if snap != nil {
		s.sandbox(r.Context(), rec.ID) // it adopts the processes of the snapshot's instant
	}
	writeJSON(w, http.StatusCreated, sandboxJSON(rec))
	return nil
}

// createErr is a failure to make a known template's box. A 404 from create
// means the template is unknown to E2B's SDKs and users; a template in the
// table whose image cannot be had (nor the kernel, nor the assets) is this
// server's failure, a 500 naming the image.
func createErr(template, image string, err error) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return statusErr(http.StatusInternalServerError, "template %q: its image %q cannot be had on this server (boxlite image load, or a registry it can reach): %v", truncate(template), image, err)
	}
	return err
}

// network is the box's network for E2B's options: allow_internet_access
// false closes it; allowOut is the allow-list; the rest is not served.
func network(allow *bool, n *networkConfig) (boxlite.NetworkSpec, error) {
	spec := boxlite.NetworkSpec{Mode: boxlite.NetworkEnabled}
	if allow != nil && !*allow {
		spec.Mode = "disabled"
	}
	if n != nil {
		switch {
		case len(n.DenyOut) > 0:
			return spec, notServed("network.denyOut (boxlite filters egress by an allow-list: use allowOut)")
		case len(n.DNSServers) > 0:
			return spec, notServed("network.dnsServers")
		case !isNull(n.EgressProxy):
			return spec, notServed("network.egressProxy")
		case n.MaskRequestHost != nil:
			return spec, notServed("network.maskRequestHost")
		case len(n.HTTPSPorts) > 0:
			return spec, notServed("network.httpsPorts")
		case !isNull(n.Rules):
			return spec, notServed("network.rules")
		}
		if len(n.AllowOut) > 0 {
			if spec.Mode == "disabled" {
				return spec, statusErr(http.StatusBadRequest, "network.allowOut with allow_internet_access false")
			}
			spec.AllowNet = n.AllowOut
		}
	}
	return spec, nil
}

func newToken() string {
	var b [24]byte
	rand.Read(b[:])
	return "ea_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// sandboxJSON is E2B's Sandbox (create, connect, resume).
func sandboxJSON(rec record) map[string]any {
	m := map[string]any{"templateID": rec.TemplateID, "sandboxID": rec.ID, "clientID": clientID, "envdVersion": EnvdVersion,
		"envdAccessToken": rec.Token, "alias": rec.TemplateID, "domain": nil}
	if rec.Traffic != "" {
		m["trafficAccessToken"] = rec.Traffic
	}
	return m
}

func (s *Server) state(rec record) string {
	if rec.Paused {
		return "paused"
	}
	if b, err := s.rt.Get(context.Background(), rec.ID); err == nil && b.State() == boxlite.StatePaused {
		return "paused"
	}
	return "running"
}

// listedJSON is E2B's ListedSandbox; detail adds SandboxDetail's fields.
func (s *Server) listedJSON(rec record, detail bool) map[string]any {
	md := rec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	m := map[string]any{"templateID": rec.TemplateID, "alias": rec.TemplateID, "sandboxID": rec.ID, "clientID": clientID,
		"startedAt": rec.StartedAt.Format(time.RFC3339Nano), "endAt": rec.EndAt.Format(time.RFC3339Nano),
		"cpuCount": rec.CPUs, "memoryMB": rec.MemoryMiB, "diskSizeMB": rec.DiskGB * 1024, "metadata": md,
		"state": s.state(rec), "envdVersion": EnvdVersion}
	if detail {
		m["envdAccessToken"] = rec.Token
		m["domain"] = nil
	}
	return m
}

func (s *Server) record(r *http.Request) (record, error) {
	rec, ok := s.store.get(r.PathValue("id"))
	if !ok || rec.Key != caller(r) { // another key's sandbox is not there for this one
		return record{}, statusErr(http.StatusNotFound, "sandbox %q not found", truncate(r.PathValue("id")))
	}
	return rec, nil
}

// owned is the caller's records.
func (s *Server) owned(r *http.Request) []record {
	key := caller(r)
	var out []record
	for _, rec := range s.store.all() {
		if rec.Key == key {
			out = append(out, rec)
		}
	}
	return out
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.listedJSON(rec, true))
	return nil
}

func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if err := s.kill(r.Context(), rec.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if err := s.decode(r, &req, false); err != nil {
		return err
	}
	if req.Timeout == nil {
		return statusErr(http.StatusBadRequest, "timeout is required")
	}
	d, err := s.timeoutOf(req.Timeout, 0)
	if err != nil {
		return err
	}
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if _, ok := s.store.update(rec.ID, func(rec *record) { rec.EndAt = time.Now().UTC().Add(d) }); !ok {
		return statusErr(http.StatusNotFound, "sandbox %q not found", truncate(rec.ID))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Duration *int `json:"duration"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	d, err := s.timeoutOf(req.Duration, 60*time.Second)
	if err != nil {
		return err
	}
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if _, ok := s.store.update(rec.ID, func(rec *record) {
		if end := time.Now().UTC().Add(d); end.After(rec.EndAt) {
			rec.EndAt = end
		}
	}); !ok {
		return statusErr(http.StatusNotFound, "sandbox %q not found", truncate(rec.ID))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// metrics is one sample now: E2B's SandboxMetric from the box's VMM.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	m := map[string]any{"timestamp": now.Format(time.RFC3339Nano), "timestampUnix": now.Unix(), "cpuCount": rec.CPUs,
		"cpuUsedPct": 0.0, "memUsed": 0, "memTotal": int64(rec.MemoryMiB) << 20, "memCache": 0,
		"diskUsed": 0, "diskTotal": int64(rec.DiskGB) << 30}
	if b.State() == boxlite.StateRunning {
		if bm, err := b.Metrics(r.Context()); err == nil {
			if bm.CPUPercent != nil && rec.CPUs > 0 {
				m["cpuUsedPct"] = *bm.CPUPercent / float64(rec.CPUs)
			}
			if bm.MemoryBytes != nil {
				m["memUsed"] = *bm.MemoryBytes
			}
		}
	}
	writeJSON(w, http.StatusOK, []any{m})
	return nil
}

// boxLogLines are the box's console and shim logs as lines, bounded.
func (s *Server) boxLogLines(r *http.Request) ([]string, error) {
	rec, err := s.record(r)
	if err != nil {
		return nil, err
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range b.Logs(256 << 10) {
		for _, line := range strings.Split(strings.TrimRight(l.Text, "\n"), "\n") {
			if line != "" {
				lines = append(lines, l.Name+": "+line)
			}
		}
	}
	return lines, nil
}

func (s *Server) logsV1(w http.ResponseWriter, r *http.Request) error {
	lines, err := s.boxLogLines(r)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	logs, entries := []any{}, []any{}
	for _, l := range lines {
		logs = append(logs, map[string]any{"timestamp": now, "line": l})
		entries = append(entries, map[string]any{"timestamp": now, "message": l, "level": "info", "fields": map[string]string{}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": logs, "logEntries": entries})
	return nil
}

func (s *Server) logsV2(w http.ResponseWriter, r *http.Request) error {
	lines, err := s.boxLogLines(r)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	entries := []any{}
	for _, l := range lines {
		entries = append(entries, map[string]any{"timestamp": now, "message": l, "level": "info", "fields": map[string]string{}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": entries})
	return nil
}

var _ = errors.New
var _ = errdefs.ErrNotFound
var _ = abi.DefaultCPUs
