package boxlite

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// chanPressure is a pressure source whose events the test sends: the
// kernel's PSI triggers cannot be fired on demand without starving the
// host (TestPSITrigger checks the real trigger itself).
type chanPressure struct {
	ev   chan struct{}
	done chan struct{}
	once sync.Once
}

func newChanPressure() *chanPressure {
	return &chanPressure{ev: make(chan struct{}), done: make(chan struct{})}
}

func (c *chanPressure) Wait() error {
	select {
	case <-c.ev:
		return nil
	case <-c.done:
		return errdefs.ErrClosed
	}
}

func (c *chanPressure) Close() error { c.once.Do(func() { close(c.done) }); return nil }

// Each pressure event removes half of a pool's ready boxes (their
// directories too) and holds refills; the quiet period after the last one
// kicks the refill.
func TestWarmPoolShrinksUnderPressure(t *testing.T) {
	r := testRuntime(t)
	img := testBox(t, r).rec
	cfg := img.Config
	var boxes []*Box
	for range 4 {
		b, err := r.register(cfg, img.ImageDigest, testPoolOwner)
		if err != nil {
			t.Fatal(err)
		}
		r.forget(b)
		boxes = append(boxes, b)
	}
	p := &pool{rt: r, spec: poolSpec{size: 4, cfg: cfg}, kick: make(chan struct{}, 1), ready: append([]*Box(nil), boxes...)}
	r.pools.list = []*pool{p}
	src := newChanPressure()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	const quiet = 2 * time.Second
	go func() { defer close(done); r.watchPressure(ctx, src, quiet) }()
	defer func() { cancel(); <-done }()

	ready := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.ready) }
	press := func(want int) time.Time {
		t.Helper()
		changed := r.pools.changes()
		select {
		case src.ev <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the watcher took no event")
		}
		at := time.Now()
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatal("no pool changed after a pressure event")
		}
		if n := ready(); n != want {
			t.Fatalf("ready after a pressure event: %d, want %d", n, want)
		}
		if !r.pools.pressed.Load() || p.wantsOne() || p.roomForOne() {
			t.Fatal("a pool under pressure would refill")
		}
		return at
	}
	press(2)
	press(1)
	last := press(0)
	for i, b := range boxes {
		if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("box %d (%s) directory after the shrinks: %v", i, b.rec.ID, err)
		}
	}
	select {
	case <-p.kick:
	case <-time.After(quiet + 10*time.Second):
		t.Fatal("no refill once the pressure ended")
	}
	if d := time.Since(last); d < quiet {
		t.Errorf("refill %v after the last event, before the quiet period (%v)", d, quiet)
	}
	if r.pools.pressed.Load() || !p.wantsOne() {
		t.Error("the pool does not refill once the pressure ended")
	}
	// An event with nothing ready changes nothing but holds refills again.
	p.mu.Lock()
	p.starting--
	p.mu.Unlock()
	src.ev <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for !r.pools.pressed.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !r.pools.pressed.Load() {
		t.Error("an event with an empty pool did not hold refills")
	}
}

// The host's PSI trigger registers, waits in poll, and Close ends a Wait;
// a file that is no pressure file is refused as unsupported.
func TestPSITrigger(t *testing.T) {
	if _, err := openPSI(t.TempDir()+"/none", psiStall, psiWindow); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("trigger on a missing file: %v, want ErrUnsupported", err)
	}
	f := t.TempDir() + "/plain"
	os.WriteFile(f, nil, 0o600)
	if _, err := openPSI(f, psiStall, psiWindow); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("trigger on a plain file: %v, want ErrUnsupported", err)
	}
	tr, err := openPSI("/proc/pressure/memory", psiStall, psiWindow)
	if err != nil {
		t.Fatalf("this host has PSI (/proc/pressure/memory) but the trigger failed: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- tr.Wait() }()
	time.Sleep(100 * time.Millisecond)
	tr.Close()
	select {
	case err := <-got:
		if err != nil && !errors.Is(err, errdefs.ErrClosed) {
			t.Errorf("Wait after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a Wait")
	}
	if err := tr.Wait(); !errors.Is(err, errdefs.ErrClosed) {
		t.Errorf("Wait on a closed trigger: %v", err)
	}
}
