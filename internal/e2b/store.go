package e2b

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// record is what the server keeps of a sandbox across its restarts.
type record struct {
	ID         string            `json:"id"`
	TemplateID string            `json:"template_id"`
	Image      string            `json:"image"`
	Key        string            `json:"key"` // the API key's name that made it
	Metadata   map[string]string `json:"metadata,omitempty"`
	EnvVars    map[string]string `json:"env_vars,omitempty"`
	Token      string            `json:"token"` // envdAccessToken
	// Traffic is the trafficAccessToken: the code interpreter's port takes
	// it (E2B's code interpreter SDKs send only it on /contexts calls).
	Traffic   string    `json:"traffic_token,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndAt     time.Time `json:"end_at"`
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskGB    int       `json:"disk_gb"`
	AutoPause bool      `json:"auto_pause,omitempty"`
	Paused    bool      `json:"paused,omitempty"`
}

// store keeps the records in one JSON file, rewritten on change.
type store struct {
	path string
	mu   sync.Mutex
	m    map[string]record
}

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &store{path: filepath.Join(dir, "e2b-sandboxes.json"), m: map[string]record{}}
	data, err := os.ReadFile(s.path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if len(data) > 0 {
		var recs []record
		if err := json.Unmarshal(data, &recs); err != nil {
			return nil, err
		}
		for _, r := range recs {
			s.m[r.ID] = r
		}
	}
	return s, nil
}

// saveLocked writes the file (temp file and rename).
func (s *store) saveLocked() {
	recs := make([]record, 0, len(s.m))
	for _, r := range s.m {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	data, _ := json.Marshal(recs)
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		os.Rename(tmp, s.path)
	}
}

func (s *store) put(r record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[r.ID] = r
	s.saveLocked()
}

func (s *store) get(id string) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	return r, ok
}

// update changes a record under the lock.
func (s *store) update(id string, f func(*record)) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	if !ok {
		return r, false
	}
	f(&r)
	s.m[id] = r
	s.saveLocked()
	return r, true
}

func (s *store) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		delete(s.m, id)
		s.saveLocked()
	}
}

// all is every record, oldest first.
func (s *store) all() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]record, 0, len(s.m))
	for _, r := range s.m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// count is how many sandboxes key has.
func (s *store) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.m {
		if r.Key == key {
			n++
		}
	}
	return n
}

// expired are the running sandboxes past their end.
func (s *store) expired(now time.Time) []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []record
	for _, r := range s.m {
		if !r.Paused && now.After(r.EndAt) {
			out = append(out, r)
		}
	}
	return out
}
