package boxlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/shimapi"
)

// Pool boxes left behind. A pool box belongs to the runtime that started
// it: its shim stops and removes it when that runtime's process ends. A
// host that crashes (or a shim killed with the runtime) leaves its
// directory, which List and Get hide, so nobody could remove it. So each
// runtime with pools holds an owner lock, <home>/pools/<owner>.lock,
// flock'ed for its whole life, and writes its owner in its pool boxes'
// records; a runtime opening the home removes every pool box whose owner's
// lock is free (the owner is gone) and whose shim lock is free (no VM runs
// it), holding that shim lock while it removes the directory so no shim
// can start on it meanwhile.

const (
	poolOwnerDir = "pools"
	poolLockExt  = ".lock"
	// legacyPoolGrace: a pool record written before owners were recorded
	// is left behind once this old and no shim holds it (no start takes
	// this long: a pool box's shim takes its lock within seconds).
	legacyPoolGrace = time.Hour
)

// poolOwner is a runtime's owner lock, held until release.
type poolOwner struct {
	id string
	f  *os.File
}

// takePoolOwner makes and locks a fresh owner lock in home. The file is
// locked before it gets its name, so a sweep never sees it unlocked.
func takePoolOwner(home string) (*poolOwner, error) {
	dir := filepath.Join(home, poolOwnerDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("warm pools: %w", err)
	}
	id := newID()
	tmp := filepath.Join(dir, ".tmp-"+id)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("warm pools: owner lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("warm pools: owner lock: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+poolLockExt)); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("warm pools: owner lock: %w", err)
	}
	return &poolOwner{id: id, f: f}, nil
}

// release removes the owner lock (its pool boxes are gone by then).
func (o *poolOwner) release(home string) {
	if o == nil {
		return
	}
	os.Remove(filepath.Join(home, poolOwnerDir, o.id+poolLockExt))
	o.f.Close()
}

// sweepPoolOrphans removes the pool boxes and owner locks that no live
// runtime holds. Errors leave the box for the next sweep.
func (r *Runtime) sweepPoolOrphans() {
	recs, err := r.records()
	if err != nil {
		return
	}
	for _, rec := range recs {
		if !rec.Pool || !r.poolOwnerGone(rec) {
			continue
		}
		if err := r.removePoolOrphan(rec); err != nil {
			log.Printf("boxlite: pool box %s left by a runtime that is gone: %v", rec.ID, err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(r.home, poolOwnerDir))
	if err != nil {
		return
	}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), poolLockExt); ok && validID(id) {
			if unlock, free := r.tryPoolOwner(id); free {
				os.Remove(filepath.Join(r.home, poolOwnerDir, e.Name()))
				unlock()
			}
		}
	}
}

// poolOwnerGone tells whether the runtime that made a pool record is gone.
func (r *Runtime) poolOwnerGone(rec record) bool {
	if rec.PoolOwner == "" {
		return time.Since(rec.CreatedAt) > legacyPoolGrace
	}
	if !validID(rec.PoolOwner) {
		return true // no runtime writes such an owner
	}
	unlock, free := r.tryPoolOwner(rec.PoolOwner)
	if free {
		unlock()
	}
	return free
}

// tryPoolOwner locks an owner's lock if no runtime holds it; a lock that is
// not there is free.
func (r *Runtime) tryPoolOwner(id string) (unlock func(), free bool) {
	f, err := os.OpenFile(filepath.Join(r.home, poolOwnerDir, id+poolLockExt), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, true
	}
	if err != nil {
		return nil, false
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// removePoolOrphan removes a pool box no shim runs, holding its shim lock.
func (r *Runtime) removePoolOrphan(rec record) error {
	b := &Box{rt: r, rec: rec, dir: filepath.Join(r.home, "boxes", rec.ID)}
	f, err := os.OpenFile(b.path(shimapi.LockFile), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Its shim never started (or another sweep removed it).
	case err != nil:
		return err
	default:
		defer f.Close()
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			return nil // a shim runs it: not left behind
		}
	}
	unlock, err := r.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return b.removeFiles()
}
