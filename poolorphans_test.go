package boxlite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/shimapi"
)

// testPoolOwner is an owner no runtime holds.
const testPoolOwner = "00000000000a"

// TestPoolOrphansSwept: a runtime opening a home removes the pool boxes a
// crash left (owner gone, no shim) and keeps those a live runtime or a
// live shim holds, boxes handed over, recent records of the old format,
// and the owner locks still held.
func TestPoolOrphansSwept(t *testing.T) {
	r := testRuntime(t)
	home := r.home
	plain := testBox(t, r)
	cfg, digest := plain.rec.Config, plain.rec.ImageDigest

	// A live owner: its lock is held (flock is per open file, so this
	// process holding it is as another runtime would).
	live, err := takePoolOwner(home)
	if err != nil {
		t.Fatal(err)
	}
	defer live.release(home)
	// A dead owner whose lock file is still there, unlocked.
	dead, err := takePoolOwner(home)
	if err != nil {
		t.Fatal(err)
	}
	dead.f.Close()

	reg := func(owner string) *Box {
		t.Helper()
		b, err := r.register(cfg, digest, owner)
		if err != nil {
			t.Fatal(err)
		}
		r.forget(b)
		return b
	}
	legacy := func(age time.Duration) *Box {
		t.Helper()
		b := reg(testPoolOwner)
		b.rec.PoolOwner, b.rec.CreatedAt = "", time.Now().Add(-age).UTC()
		if err := writeJSON(b.path("box.json"), b.rec); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A shim holding its box's lock.
	shimHeld := reg(dead.id)
	f, err := os.OpenFile(shimHeld.path(shimapi.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// A box whose shim ended: its lock file is there, free.
	shimEnded := reg(dead.id)
	os.WriteFile(shimEnded.path(shimapi.LockFile), []byte("1 ended\n"), 0o600)

	keep := map[string]string{
		reg(live.id).rec.ID:        "a live runtime's pool box",
		shimHeld.rec.ID:            "a pool box a shim runs",
		reg("").rec.ID:             "a box that is no pool's",
		legacy(time.Minute).rec.ID: "a recent pool record without owner",
		plain.rec.ID:               "a plain box",
	}
	gone := map[string]string{
		reg(dead.id).rec.ID:                "a dead runtime's pool box whose shim never started",
		shimEnded.rec.ID:                   "a dead runtime's pool box whose shim ended",
		reg(testPoolOwner).rec.ID:          "a pool box whose owner lock is gone",
		reg("../../x").rec.ID:              "a pool box with an owner no runtime writes",
		legacy(2 * legacyPoolGrace).rec.ID: "an old pool record without owner",
	}

	r2, err := NewRuntime(WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for id, what := range keep {
		if _, err := os.Stat(filepath.Join(home, "boxes", id)); err != nil {
			t.Errorf("%s (%s) was swept: %v", what, id, err)
		}
	}
	for id, what := range gone {
		if _, err := os.Stat(filepath.Join(home, "boxes", id)); !os.IsNotExist(err) {
			t.Errorf("%s (%s) was left: %v", what, id, err)
		}
	}
	locks, _ := filepath.Glob(filepath.Join(home, poolOwnerDir, "*"))
	if want := filepath.Join(home, poolOwnerDir, live.id+poolLockExt); len(locks) != 1 || locks[0] != want {
		t.Errorf("owner locks after the sweep %v, want only the live one's", locks)
	}

	// A runtime with a pool holds its owner lock until Close, then
	// removes it.
	r3, err := NewRuntime(WithHome(home), WithWarmPool(1, "absent.invalid/image"))
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(home, poolOwnerDir, r3.pools.owner.id+poolLockExt)
	if unlock, free := r2.tryPoolOwner(r3.pools.owner.id); free {
		unlock()
		t.Fatal("a live runtime's owner lock is free")
	}
	r3.Close()
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("owner lock after Close: %v", err)
	}
}
