package e2b

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"time"

	"github.com/boxlite/boxlite"
)

// connect returns a running sandbox (200), resuming a paused one (201);
// its timeout is extended to the one given, never shortened.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Timeout *int            `json:"timeout"`
		Memory  json.RawMessage `json:"memory"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	d, err := s.timeoutOf(req.Timeout, DefaultTimeout)
	if err != nil {
		return err
	}
	return s.wake(w, r, d, false)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Timeout   *int  `json:"timeout"`
		AutoPause *bool `json:"autoPause"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	d, err := s.timeoutOf(req.Timeout, DefaultTimeout)
	if err != nil {
		return err
	}
	if err := s.wake(w, r, d, true); err != nil {
		return err
	}
	if req.AutoPause != nil { // what the sandbox does at its next timeout
		s.store.update(r.PathValue("id"), func(rec *record) { rec.AutoPause = *req.AutoPause })
	}
	return nil
}

func (s *Server) wake(w http.ResponseWriter, r *http.Request, d time.Duration, resumeOnly bool) error {
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if b.State() == boxlite.StatePaused {
		if err := b.Resume(r.Context()); err != nil {
			return err
		}
		status = http.StatusCreated
	} else if resumeOnly {
		return statusErr(http.StatusConflict, "sandbox %s is not paused", rec.ID)
	}
	rec, _ = s.store.update(rec.ID, func(rec *record) {
		rec.Paused = false
		if rec.Traffic == "" { // a record from before traffic tokens
			rec.Traffic = newToken()
		}
		if end := time.Now().UTC().Add(d); end.After(rec.EndAt) || status == http.StatusCreated {
			rec.EndAt = end
		}
	})
	if status == http.StatusCreated {
		s.sandbox(r.Context(), rec.ID) // it adopts the processes the pause kept
	}
	writeJSON(w, status, sandboxJSON(rec))
	return nil
}

// pause saves the box's memory and stops its VM (Box.Pause); its timeout
// stops running until it is resumed.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Memory              json.RawMessage `json:"memory"`
		RequireHealthyGuest *bool           `json:"requireHealthyGuest"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if err := s.pauseSandbox(r.Context(), rec.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseSandbox pauses a sandbox's box (a pause request, or its timeout with
// autoPause): its processes and watchers end, its timeout stops running.
func (s *Server) pauseSandbox(ctx context.Context, id string) error {
	b, err := s.rt.Get(ctx, id)
	if err != nil {
		return err
	}
	if b.State() == boxlite.StatePaused {
		return statusErr(http.StatusConflict, "sandbox %s is already paused", id)
	}
	rec, _ := s.store.get(id)
	procs := s.procsOf(ctx, rec)
	s.mu.Lock()
	sb := s.live[id]
	delete(s.live, id)
	s.mu.Unlock()
	if sb != nil {
		sb.shutdown()
	}
	if _, err := b.Pause(ctx); err != nil {
		return err
	}
	s.store.update(id, func(rec *record) { rec.Paused, rec.Procs = true, procs })
	return nil
}

// updateNetwork replaces a running sandbox's egress rules (E2B's PUT
// .../network; omitted fields are cleared): allowInternetAccess false, or
// denyOut 0.0.0.0/0 alone, closes egress; allowOut is the allow-list, as at
// create (with or without denyOut 0.0.0.0/0); nothing opens it all. Other
// deny lists, DNS servers, proxies and rules are not served.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		AllowOut            []string        `json:"allowOut"`
		DenyOut             []string        `json:"denyOut"`
		DNSServers          []string        `json:"dnsServers"`
		EgressProxy         json.RawMessage `json:"egressProxy"`
		Rules               json.RawMessage `json:"rules"`
		AllowInternetAccess *bool           `json:"allowInternetAccess"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	denyAll := len(req.DenyOut) == 1 && (req.DenyOut[0] == "0.0.0.0/0" || req.DenyOut[0] == "::/0")
	switch {
	case len(req.DenyOut) > 0 && !denyAll:
		return notServed("network.denyOut other than 0.0.0.0/0 (boxlite filters egress by an allow-list: use allowOut)")
	case len(req.DNSServers) > 0:
		return notServed("network.dnsServers")
	case !isNull(req.EgressProxy):
		return notServed("network.egressProxy")
	case !isNull(req.Rules):
		return notServed("network.rules")
	}
	closed := req.AllowInternetAccess != nil && !*req.AllowInternetAccess || denyAll && len(req.AllowOut) == 0
	if closed && len(req.AllowOut) > 0 {
		return statusErr(http.StatusBadRequest, "network.allowOut with allowInternetAccess false")
	}
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if rec.Paused {
		return statusErr(http.StatusConflict, "sandbox %s is paused", rec.ID)
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	mode, allow := boxlite.NetworkEnabled, req.AllowOut
	if closed {
		mode, allow = boxlite.NetworkDisabled, nil
	}
	if err := b.UpdateOutbound(r.Context(), mode, allow); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ForkTimeout is a fork's timeout when the request has none (E2B's
// default), and MaxForkCount the most forks one request makes (E2B's).
const (
	ForkTimeout  = 15 * time.Second
	MaxForkCount = 20
)

// fork is Box.Fork: the sandbox is saved in place (stopped only for that
// instant, then running on, its id and timeout untouched) and count new
// sandboxes resume from that state, each with its own access token and
// timeout, the source's template, metadata and envVars. Box.Fork makes all
// or none, so a failure fails the request rather than one fork.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Timeout *int `json:"timeout"`
		Count   *int `json:"count"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	d, err := s.timeoutOf(req.Timeout, ForkTimeout)
	if err != nil {
		return err
	}
	count := 1
	if req.Count != nil {
		if count = *req.Count; count < 1 || count > MaxForkCount {
			return statusErr(http.StatusBadRequest, "count %d: want 1 to %d", count, MaxForkCount)
		}
	}
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	if rec.Paused {
		return statusErr(http.StatusConflict, "sandbox %s is paused: connect to resume it, then fork", rec.ID)
	}
	key := caller(r)
	if n := s.store.count(key); n+count > s.lim.SandboxesPerKey {
		return statusErr(http.StatusTooManyRequests, "key %q has %d sandboxes; %d more would pass its limit, %d", key, n, count, s.lim.SandboxesPerKey)
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	procs := s.procsOf(r.Context(), rec)
	forks, err := b.Fork(r.Context(), count, nil)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	results := make([]map[string]any, 0, len(forks))
	for _, f := range forks {
		info := f.Info()
		frec := record{ID: f.ID(), TemplateID: rec.TemplateID, Image: rec.Image, Key: key, Metadata: maps.Clone(rec.Metadata),
			EnvVars: maps.Clone(rec.EnvVars), Token: newToken(), Traffic: newToken(), StartedAt: now, EndAt: now.Add(d),
			CPUs: info.Config.CPUs, MemoryMiB: info.Config.MemoryMiB, DiskGB: info.Config.DiskSizeGB, Procs: procs}
		s.store.put(frec)
		s.sandbox(r.Context(), frec.ID) // it adopts the source's processes
		results = append(results, map[string]any{"sandbox": sandboxJSON(frec)})
	}
	writeJSON(w, http.StatusCreated, results)
	return nil
}
