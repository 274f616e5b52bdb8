package template

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
)

// fake builds a template directory by hand: a state, 8 MiB of memory with
// a little data, a disk.
func fake(t *testing.T) func(dir string) (Built, error) {
	return func(dir string) (Built, error) {
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("device state"), 0o600); err != nil {
			t.Fatal(err)
		}
		ram, err := os.Create(filepath.Join(dir, ramFile))
		if err != nil {
			t.Fatal(err)
		}
		ram.WriteAt([]byte("guest memory"), 1<<20)
		ram.Truncate(8 << 20)
		ram.Close()
		if err := os.WriteFile(filepath.Join(dir, DiskFile), []byte("disk"), 0o600); err != nil {
			t.Fatal(err)
		}
		return Built{Hello: protocol.Hello{Version: protocol.Version, Features: []string{protocol.FeatureIdentity}}}, nil
	}
}

func TestCreateGetState(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if _, err := s.Get("k"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Get of nothing = %v, want not found", err)
	}
	tm, err := s.Create("k", 0, fake(t))
	if err != nil {
		t.Fatal(err)
	}
	if tm.MemoryMiB != 8 || !tm.Hello.Has(protocol.FeatureIdentity) || tm.Key != "k" {
		t.Fatalf("meta %+v", tm.Meta)
	}
	f, err := tm.State()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A second Create finds it: the build does not run.
	if _, err := s.Create("k", 0, func(string) (Built, error) { t.Fatal("built again"); return Built{}, nil }); err != nil {
		t.Fatal(err)
	}
	// A state that does not match its digest is refused.
	os.WriteFile(filepath.Join(tm.Dir, stateFile), []byte("device statE"), 0o600)
	if _, err := tm.State(); err == nil {
		t.Fatal("State of a changed state file: no error")
	}
	// A template of another format is stale.
	b, _ := os.ReadFile(filepath.Join(tm.Dir, metaFile))
	os.WriteFile(filepath.Join(tm.Dir, metaFile), append(b[:len(b)-1], []byte(`,"format":99}`)...), 0o600)
	if _, err := s.Get("k"); err == nil || errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Get of another format = %v, want stale", err)
	}
}

func TestCreateLockedAndFailed(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	// While one builds, another gets already-exists at once.
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := s.Create("k", 0, func(dir string) (Built, error) {
			close(in)
			<-release
			return fake(t)(dir)
		})
		done <- err
	}()
	<-in
	if _, err := s.Create("k", 0, fake(t)); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create while another builds, not waiting = %v, want already exists", err)
	}
	// One that waits gets the other's template, built once.
	waited := make(chan error)
	go func() {
		_, err := s.Create("k", time.Minute, func(string) (Built, error) { t.Error("built twice"); return Built{}, nil })
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("Create that waited = %v", err)
	}
	// A failed build leaves nothing behind, and neither does a dead one's.
	os.Mkdir(filepath.Join(s.Dir, ".new-j-123"), 0o700)
	if _, err := s.Create("j", 0, func(string) (Built, error) { return Built{}, errors.New("boom") }); err == nil {
		t.Fatal("failed build: no error")
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 1 || ents[0].Name() != "k" {
		t.Errorf("left after a failed build: %v", ents)
	}
}

func TestPrune(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	for i := 0; i <= MaxPerImage; i++ {
		if _, err := s.Create("k"+strconv.Itoa(i), 0, fake(t)); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(filepath.Join(s.Dir, "k"+strconv.Itoa(i), metaFile), old, old)
	}
	if _, err := s.Create("new", 0, fake(t)); err != nil {
		t.Fatal(err)
	}
	// The new one and the MaxPerImage-1 most recent others stay.
	for i := 0; i <= MaxPerImage; i++ {
		_, err := os.Stat(filepath.Join(s.Dir, "k"+strconv.Itoa(i)))
		if kept, want := err == nil, i >= 2; kept != want {
			t.Errorf("k%d kept = %v, want %v", i, kept, want)
		}
	}
	ents, _ := os.ReadDir(s.Dir)
	if n := len(ents); n != MaxPerImage {
		t.Errorf("%d templates after prune, want %d", n, MaxPerImage)
	}
}

// TestRAMShared: the first taker copies the memory into a sealed memfd and
// offers it; the next opens the same one; once released, it is gone.
func TestRAMShared(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	tm, err := s.Create("k", 0, fake(t))
	if err != nil {
		t.Fatal(err)
	}
	a, releaseA, err := tm.RAM()
	if err != nil {
		t.Fatal(err)
	}
	if !hv.Sealed(a) {
		t.Fatal("template memory is not sealed")
	}
	got := make([]byte, 12)
	a.ReadAt(got, 1<<20)
	if string(got) != "guest memory" {
		t.Fatalf("memory reads %q", got)
	}
	b, releaseB, err := tm.RAM()
	if err != nil {
		t.Fatal(err)
	}
	ia, _ := fileID(a)
	if ib, _ := fileID(b); ia != ib {
		t.Error("the second taker got another copy, not the offered memfd")
	}
	releaseB()
	releaseA()
	if ents, _ := os.ReadDir(filepath.Join(tm.Dir, holderDir)); len(ents) != 0 {
		t.Errorf("holders left after release: %v", ents)
	}
	// A stale entry (a dead process) is dropped.
	os.WriteFile(filepath.Join(tm.Dir, holderDir, "999999999-3"), []byte("1:2"), 0o600)
	_, releaseC, err := tm.RAM()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	if _, err := os.Stat(filepath.Join(tm.Dir, holderDir, "999999999-3")); err == nil {
		t.Error("a dead holder's entry was kept")
	}
}
