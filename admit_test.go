package boxlite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

func TestAdmitBootSlots(t *testing.T) {
	rt, err := NewRuntime(WithHome(t.TempDir()), WithMaxConcurrentBoots(1))
	if err != nil {
		t.Fatal(err)
	}
	release, err := rt.admitBoot(context.Background(), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	// A second runtime on the same home (another process, as far as flock
	// is concerned) waits for the slot.
	rt2, err := NewRuntime(WithHome(rt.Home()), WithMaxConcurrentBoots(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := rt2.admitBoot(ctx, "b", 1); !errors.Is(err, errdefs.ErrTimeout) {
		t.Fatalf("second boot while the only slot is held: %v; want a timeout", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := rt2.admitBoot(context.Background(), "b", 1)
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting boot was not admitted after the slot was freed")
	}
	if _, err := NewRuntime(WithHome(t.TempDir()), WithMaxConcurrentBoots(0)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("0 boots: %v", err)
	}
}

func TestHostMemoryRefusesHugeBox(t *testing.T) {
	total, err := meminfoMiB("MemTotal")
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultBoxConfig("x")
	cfg.MemoryMiB = int(total) + 1
	if err := checkHostMemory(cfg); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("a %d MiB box on a %d MiB host: %v; want ErrLimit", cfg.MemoryMiB, total, err)
	} else {
		t.Log(err)
	}
	cfg.MemoryMiB = 512
	if err := checkHostMemory(cfg); err != nil {
		t.Fatal(err)
	}
}

// A boot waits for memory: the needs of the boots in flight (in any process
// of the home) count against what is available, and one still short when
// its context ends fails with ErrLimit, saying what it needs and has.
func TestAdmitBootMemory(t *testing.T) {
	avail, err := meminfoMiB("MemAvailable")
	if err != nil {
		t.Fatal(err)
	}
	if avail < 4000 {
		t.Fatalf("the test needs 4000 MiB available, the host has %d", avail)
	}
	// Leave 2000 MiB (give or take the host's own drift) to box starts.
	home := t.TempDir()
	rtA, err := NewRuntime(WithHome(home), WithMaxConcurrentBoots(2), WithHostMemoryReserveMiB(avail-2000))
	if err != nil {
		t.Fatal(err)
	}
	rtB, err := NewRuntime(WithHome(home), WithMaxConcurrentBoots(2), WithHostMemoryReserveMiB(avail-2000))
	if err != nil {
		t.Fatal(err)
	}
	releaseA, err := rtA.admitBoot(context.Background(), "a", 1500)
	if err != nil {
		t.Fatal(err)
	}
	// A slot is free, but 1000 MiB are not: 1500 of the 2000 are A's.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = rtB.admitBoot(ctx, "b", 1000)
	if !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "needs 1000 MiB") || !strings.Contains(err.Error(), "1500 MiB of which are promised") {
		t.Fatalf("a boot the memory in flight leaves no room for: %v; want ErrLimit saying why", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := rtB.admitBoot(context.Background(), "b", 1000)
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	releaseA()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting boot was not admitted once the memory in flight was released")
	}
	if _, err := NewRuntime(WithHome(home), WithHostMemoryReserveMiB(0)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("reserve 0: %v", err)
	}
}
