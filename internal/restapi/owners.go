package restapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// owners records which key created which box, in StateDir/owners.json, so
// the per-key limits survive a restart of the server. A box removed behind
// the server's back (the CLI) stops counting at the next check.
type owners struct {
	mu   sync.Mutex
	path string
	m    map[string]owned // box id -> owner
	// pending are creates admitted and not yet recorded, per key.
	pending map[string]owned
}

type owned struct {
	Key       string `json:"key"`
	MemoryMiB int    `json:"memory_mib"`
	boxes     int    // in pending: how many creates
}

func openOwners(dir string) (*owners, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	o := &owners{path: filepath.Join(dir, "owners.json"), m: map[string]owned{}, pending: map[string]owned{}}
	data, err := os.ReadFile(o.path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &o.m); err != nil {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v", o.path, err)
		}
	}
	return o, nil
}

func (o *owners) saveLocked() error {
	data, err := json.Marshal(o.m)
	if err != nil {
		return err
	}
	tmp := o.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, o.path)
}

// admit checks key's limits for one more box of memMiB against the boxes
// that exist (live) and the creates admitted before, and holds its place
// until done is called (after add, or when the create failed).
func (o *owners) admit(key string, memMiB int, live []boxlite.BoxInfo, lim Limits) (done func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	exists := map[string]bool{}
	for _, b := range live {
		exists[b.ID] = true
	}
	p := o.pending[key]
	boxes, mem := p.boxes, p.MemoryMiB
	for id, ow := range o.m {
		if !exists[id] {
			delete(o.m, id)
			continue
		}
		if ow.Key == key {
			boxes++
			mem += ow.MemoryMiB
		}
	}
	if boxes+1 > lim.BoxesPerKey {
		return nil, newError(errQuota, "key %q has %d boxes, its limit", key, boxes)
	}
	if mem+memMiB > lim.MemoryMiBPerKey {
		return nil, newError(errQuota, "key %q's boxes have %d MiB; %d MiB more is over its limit of %d MiB", key, mem, memMiB, lim.MemoryMiBPerKey)
	}
	o.pending[key] = owned{Key: key, MemoryMiB: p.MemoryMiB + memMiB, boxes: p.boxes + 1}
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			q := o.pending[key]
			q.boxes--
			q.MemoryMiB -= memMiB
			if q.boxes <= 0 {
				delete(o.pending, key)
			} else {
				o.pending[key] = q
			}
		})
	}, nil
}

func (o *owners) add(id, key string, memMiB int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[id] = owned{Key: key, MemoryMiB: memMiB}
	if err := o.saveLocked(); err != nil {
		return fmt.Errorf("recording the box's owner: %w", err)
	}
	return nil
}

func (o *owners) remove(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.m[id]; ok {
		delete(o.m, id)
		_ = o.saveLocked()
	}
}
