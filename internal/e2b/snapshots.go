package e2b

import (
	"context"
	"crypto/rand"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// E2B's snapshots (docs/e2b.md, "Snapshots"): POST /sandboxes/{id}/snapshots
// saves a sandbox at one instant (it runs on); the snapshot's id is a
// template id, and every sandbox created from it starts from that instant.
//
// A snapshot is kept in a holder: a box of this server's, cloned from a
// memory snapshot of the source at once, so it is paused at the instant
// and never run, and owns one snapshot of itself (holderSnapshot) that
// sandboxes are cloned from. The source may then be killed, paused or
// changed: the holder depends on nothing of it.

// snapshot is what the server keeps of an E2B snapshot.
type snapshot struct {
	ID         string            `json:"id"`             // 20 of [a-z0-9]
	Name       string            `json:"name,omitempty"` // its alias, if named
	Key        string            `json:"key"`            // the API key's name that made it
	Source     string            `json:"source"`         // the sandbox it was taken of
	Holder     string            `json:"holder"`         // the holder box's id
	Memory     bool              `json:"memory"`
	TemplateID string            `json:"template_id"` // the source's template
	Image      string            `json:"image"`
	EnvVars    map[string]string `json:"env_vars,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	Procs      []procInfo        `json:"procs,omitempty"` // the processes a sandbox from it adopts
}

// holderSnapshot is the name of the holder's snapshot sandboxes are cloned from.
const holderSnapshot = "e2b"

// snapshotTag is the one tag a snapshot has (E2B's ids are TEMPLATE:TAG).
const snapshotTag = ":default"

var (
	snapshotIDPattern   = regexp.MustCompile(`^[a-z0-9]{20}$`)
	snapshotNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
	// snapshotRefPattern is what may name a snapshot: ID, NAME or
	// NAMESPACE/NAME, with or without a tag.
	snapshotRefPattern = regexp.MustCompile(`^([a-zA-Z0-9][a-zA-Z0-9._-]{0,63}/)?[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}(:[a-zA-Z0-9._-]{1,64})?$`)
)

func newSnapshotID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [20]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// ref is the snapshot's id as E2B's API gives it: NAMESPACE/NAME:default
// when named (the namespace is the API key's name, as E2B's is the
// team's), else ID:default.
func (sn snapshot) ref() string {
	if sn.Name != "" {
		return sn.Key + "/" + sn.Name + snapshotTag
	}
	return sn.ID + snapshotTag
}

func (sn snapshot) json() map[string]any {
	return map[string]any{"snapshotID": sn.ref(), "names": []string{sn.ref()}}
}

// matches reports whether ref (ID, NAME or NAMESPACE/NAME, with or without
// the tag) names sn.
func (sn snapshot) matches(ref string) bool {
	if base, tag, ok := strings.Cut(ref, ":"); ok {
		if ":"+tag != snapshotTag {
			return false
		}
		ref = base
	}
	if ns, name, ok := strings.Cut(ref, "/"); ok {
		return sn.Name != "" && ns == sn.Key && name == sn.Name
	}
	return ref == sn.ID || sn.Name != "" && ref == sn.Name
}

// snapStore is the snapshots' records.
type snapStore struct{ *jsonStore[snapshot] }

func openSnapStore(dir string) (*snapStore, error) {
	js, err := openJSONStore(dir, "e2b-snapshots.json", func(sn snapshot) string { return sn.ID })
	if err != nil {
		return nil, err
	}
	return &snapStore{js}, nil
}

// owned is key's snapshots, newest first.
func (s *snapStore) owned(key string) []snapshot {
	out := s.filter(func(sn snapshot) bool { return sn.Key == key })
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// resolve is key's snapshot ref names; another key's is not there.
func (s *snapStore) resolve(key, ref string) (snapshot, bool) {
	for _, sn := range s.owned(key) {
		if sn.matches(ref) {
			return sn, true
		}
	}
	return snapshot{}, false
}

// putNamed records sn; a snapshot of the same key and name is replaced
// (E2B assigns a new build to the existing template): sn takes its id, and
// the replaced one is returned, for its holder to be removed.
func (s *snapStore) putNamed(sn snapshot) (snapshot, snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old snapshot
	replaced := false
	if sn.Name != "" {
		for _, o := range s.m {
			if o.Key == sn.Key && o.Name == sn.Name {
				old, replaced = o, true
				sn.ID = o.ID
				break
			}
		}
	}
	s.m[sn.ID] = sn
	s.saveLocked()
	return sn, old, replaced
}

// DefaultSnapshotsPerKey is how many snapshots a key may keep.
const DefaultSnapshotsPerKey = 50

func snapshotNotFound(ref string) error {
	return statusErr(http.StatusNotFound, "snapshot %q not found", truncate(ref))
}

// createSnapshot is POST /sandboxes/{id}/snapshots: the sandbox is saved at
// one instant (with its memory unless memory is false) into a new holder.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name   *string `json:"name"`
		Memory *bool   `json:"memory"`
	}
	if err := s.decode(r, &req, true); err != nil {
		return err
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
		if !snapshotNamePattern.MatchString(name) || snapshotIDPattern.MatchString(name) {
			return statusErr(http.StatusBadRequest, "snapshot name %q: want 1-64 letters, digits, '_' or '-', starting with a letter or digit (and not 20 lowercase letters and digits, the form of an id)", truncate(name))
		}
		if _, ok := s.templates[name]; ok {
			return statusErr(http.StatusBadRequest, "snapshot name %q is a template of this server's table", name)
		}
	}
	memory := req.Memory == nil || *req.Memory
	rec, err := s.record(r)
	if err != nil {
		return err
	}
	key := caller(r)
	if name == "" || len(s.snaps.filter(func(sn snapshot) bool { return sn.Key == key && sn.Name == name })) == 0 {
		if n := len(s.snaps.owned(key)); n >= s.lim.SnapshotsPerKey {
			return statusErr(http.StatusTooManyRequests, "key %q has %d snapshots, its limit", key, n)
		}
	}
	b, err := s.rt.Get(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	sn := snapshot{ID: newSnapshotID(), Name: name, Key: key, Source: rec.ID, Memory: memory, TemplateID: rec.TemplateID,
		Image: rec.Image, EnvVars: maps.Clone(rec.EnvVars), CreatedAt: time.Now().UTC()}
	if memory {
		sn.Procs = s.procsOf(r.Context(), rec)
	} else if b.State() == boxlite.StateRunning {
		// The disk alone is as a power cut would leave it: what the guest
		// has not written back is written first (E2B's filesystem mode
		// needs a guest that answers, as here).
		if _, err := b.Run(r.Context(), boxlite.Command{Argv: []string{"sync"}, Timeout: 2 * time.Minute}); err != nil {
			return err
		}
	}
	if sn.Holder, err = s.hold(r.Context(), b, sn.ID, memory); err != nil {
		return err
	}
	sn, old, replaced := s.snaps.putNamed(sn)
	if replaced {
		s.dropHolder(r.Context(), old.Holder)
	}
	writeJSON(w, http.StatusCreated, sn.json())
	return nil
}

// hold saves box b at one instant (its memory too, with memory) and makes
// the holder of that instant: a clone (paused at the instant, or stopped
// with a disk alone) holding one snapshot of itself, holderSnapshot. The
// source keeps no snapshot of its own. It returns the holder's id.
func (s *Server) hold(ctx context.Context, b *boxlite.Box, id string, memory bool) (string, error) {
	tmp := "e2b-snapshot-" + id
	if _, err := b.CreateSnapshotWith(ctx, tmp, boxlite.SnapshotOptions{Memory: memory}); err != nil {
		return "", err
	}
	defer b.RemoveSnapshot(context.WithoutCancel(ctx), tmp)
	h, err := b.Clone(ctx, boxlite.CloneOptions{Name: tmp, Snapshot: tmp})
	if err != nil {
		return "", err
	}
	if _, err := h.CreateSnapshotWith(ctx, holderSnapshot, boxlite.SnapshotOptions{Memory: memory}); err != nil {
		h.Remove(context.WithoutCancel(ctx), true)
		return "", err
	}
	return h.ID(), nil
}

// dropHolder removes a holder box; clones made from it are not touched
// (a clone is a box of its own). It waits for clones under way.
func (s *Server) dropHolder(ctx context.Context, id string) error {
	s.holders.Lock()
	defer s.holders.Unlock()
	err := s.rt.Remove(context.WithoutCancel(ctx), id, true)
	if errors.Is(err, errdefs.ErrNotFound) {
		err = nil
	}
	if err != nil {
		s.logf("e2b: removing snapshot holder %s: %v", id, err)
	}
	return err
}

// fromSnapshot makes a new box from a snapshot's holder: paused at the
// snapshot's instant (a memory snapshot) or stopped with its disk; Start
// resumes or boots it.
func (s *Server) fromSnapshot(ctx context.Context, sn snapshot) (*boxlite.Box, error) {
	s.holders.RLock()
	defer s.holders.RUnlock()
	h, err := s.rt.Get(ctx, sn.Holder)
	if err == nil {
		var b *boxlite.Box
		if b, err = h.Clone(ctx, boxlite.CloneOptions{Snapshot: holderSnapshot}); err == nil {
			return b, nil
		}
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, statusErr(http.StatusNotFound, "snapshot %q: its holder box %s is gone (removed outside E2B's API): delete the snapshot", sn.ref(), sn.Holder)
	}
	return nil, err
}

// listSnapshots is GET /snapshots: the caller's snapshots, newest first,
// by source sandbox (sandboxID) or name or id (name), in pages.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "sandboxID", "name", "limit", "nextToken":
		default:
			return statusErr(http.StatusBadRequest, "unknown query parameter %q", truncate(k))
		}
	}
	source, ref := q.Get("sandboxID"), q.Get("name")
	if source != "" && !sandboxIDPattern.MatchString(source) {
		return statusErr(http.StatusBadRequest, "sandboxID %q: want 1-128 letters, digits, '.', '_' or '-'", truncate(source))
	}
	if ref != "" && !snapshotRefPattern.MatchString(ref) {
		return statusErr(http.StatusBadRequest, "name %q: want a snapshot's id or name, with or without its namespace and tag", truncate(ref))
	}
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	from, err := pageFrom(q.Get("nextToken"))
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for i, sn := range s.snaps.owned(caller(r)) {
		if i < from || source != "" && sn.Source != source || ref != "" && !sn.matches(ref) {
			continue
		}
		if len(out) == limit {
			w.Header().Set("X-Next-Token", pageToken(i))
			break
		}
		out = append(out, sn.json())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteTemplate is DELETE /templates/{template}: E2B's SDKs delete a
// snapshot so. A snapshot goes with its holder; the sandboxes made from it
// run on. A template of the table is not deleted.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	ref := r.PathValue("template")
	if _, ok := s.templates[ref]; ok {
		return notServed("template deletion (templates are local images: docs/e2b.md)")
	}
	if !snapshotRefPattern.MatchString(ref) {
		return statusErr(http.StatusBadRequest, "template %q: want a snapshot's id or name, with or without its namespace and tag", truncate(ref))
	}
	sn, ok := s.snaps.resolve(caller(r), ref)
	if !ok {
		return snapshotNotFound(ref)
	}
	if err := s.dropHolder(r.Context(), sn.Holder); err != nil {
		return err
	}
	s.snaps.remove(sn.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
