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
	// Procs are the processes a paused sandbox adopts when it resumes.
	Procs []procInfo `json:"procs,omitempty"`
}

// jsonStore keeps values by id in one JSON file, rewritten on change
// (a temp file and a rename).
type jsonStore[T any] struct {
	path string
	id   func(T) string
	mu   sync.Mutex
	m    map[string]T
}

func openJSONStore[T any](dir, file string, id func(T) string) (*jsonStore[T], error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &jsonStore[T]{path: filepath.Join(dir, file), id: id, m: map[string]T{}}
	data, err := os.ReadFile(s.path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if len(data) > 0 {
		var vals []T
		if err := json.Unmarshal(data, &vals); err != nil {
			return nil, err
		}
		for _, v := range vals {
			s.m[id(v)] = v
		}
	}
	return s, nil
}

// saveLocked writes the file (temp file and rename).
func (s *jsonStore[T]) saveLocked() {
	ids := make([]string, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	vals := make([]T, 0, len(ids))
	for _, id := range ids {
		vals = append(vals, s.m[id])
	}
	data, _ := json.Marshal(vals)
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		os.Rename(tmp, s.path)
	}
}

func (s *jsonStore[T]) put(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[s.id(v)] = v
	s.saveLocked()
}

func (s *jsonStore[T]) get(id string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	return v, ok
}

// update changes a value under the lock.
func (s *jsonStore[T]) update(id string, f func(*T)) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return v, false
	}
	f(&v)
	s.m[id] = v
	s.saveLocked()
	return v, true
}

func (s *jsonStore[T]) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		delete(s.m, id)
		s.saveLocked()
	}
}

// filter is the values keep accepts, in no order.
func (s *jsonStore[T]) filter(keep func(T) bool) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	for _, v := range s.m {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// store is the sandboxes' records.
type store struct{ *jsonStore[record] }

func openStore(dir string) (*store, error) {
	js, err := openJSONStore(dir, "e2b-sandboxes.json", func(r record) string { return r.ID })
	if err != nil {
		return nil, err
	}
	return &store{js}, nil
}

// all is every record, oldest first.
func (s *store) all() []record {
	out := s.filter(func(record) bool { return true })
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
	return len(s.filter(func(r record) bool { return r.Key == key }))
}

// expired are the running sandboxes past their end.
func (s *store) expired(now time.Time) []record {
	return s.filter(func(r record) bool { return !r.Paused && now.After(r.EndAt) })
}
