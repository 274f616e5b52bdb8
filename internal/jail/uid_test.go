package jail_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/jail"
)

func TestAllocUID(t *testing.T) {
	dir := t.TempDir()
	lo, hi := jail.UIDRangeLo, jail.UIDRangeLo+99
	var mu sync.Mutex
	got := map[uint32]func(){}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid, release, err := jail.AllocUID(dir, lo, hi)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if _, dup := got[uid]; dup {
				errs <- fmt.Errorf("uid %d given twice", uid)
			}
			got[uid] = release
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d distinct uids, want 8", len(got))
	}
	var all []uint32
	for u := range got {
		all = append(all, u)
	}
	slices.Sort(all)
	t.Logf("uids: %v", all)
	// Another process sees the locks too.
	out, err := exec.Command("flock", "-n", filepath.Join(dir, strconv.Itoa(int(all[3]))+".lock"), "true").CombinedOutput()
	if err == nil {
		t.Errorf("flock(1) could take the lock of uid %d held by AllocUID: %s", all[3], out)
	}
	got[all[3]]()
	got[all[3]]() // twice is harmless
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(int(all[3]))+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("release left the lock file: %v", err)
	}
	again, release, err := jail.AllocUID(dir, lo, hi)
	if err != nil || again != all[3] {
		t.Errorf("after releasing %d, AllocUID gave %d (%v), want it back", all[3], again, err)
	}
	release()
	for _, u := range all {
		got[u]()
	}
	// Ids of /etc/passwd users are never given: uid 1 is daemon on Debian.
	if _, _, err := jail.AllocUID(dir, 1, 1); !errors.Is(err, errdefs.ErrLimit) {
		t.Errorf("AllocUID over [1, 1] (a passwd user): %v, want ErrLimit", err)
	}
	if _, _, err := jail.AllocUID(dir, 5, 4); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("AllocUID over [5, 4]: %v, want ErrInvalidArgument", err)
	}
}

// TestAllocUIDHostWide: the shims of every home allocate from HostUIDDir,
// so allocations there never repeat an id held by another; a state
// directory others could write (where they could delete a lock) or a
// symlink is refused.
func TestAllocUIDHostWide(t *testing.T) {
	requireRoot(t)
	a, releaseA, err := jail.AllocUID(jail.HostUIDDir, jail.UIDRangeLo, jail.UIDRangeHi)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseA()
	b, releaseB, err := jail.AllocUID(jail.HostUIDDir, jail.UIDRangeLo, jail.UIDRangeHi)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseB()
	if a == b {
		t.Errorf("two allocations from %s gave uid %d twice", jail.HostUIDDir, a)
	}
	st, err := os.Lstat(jail.HostUIDDir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v, want a 0700 directory", jail.HostUIDDir, st.Mode(), err)
	}

	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if _, _, err := jail.AllocUID(open, jail.UIDRangeLo, jail.UIDRangeHi); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("AllocUID in a world-writable directory: %v, want ErrInvalidArgument", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	if _, _, err := jail.AllocUID(link, jail.UIDRangeLo, jail.UIDRangeHi); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("AllocUID through a symlink: %v, want ErrInvalidArgument", err)
	}
}
