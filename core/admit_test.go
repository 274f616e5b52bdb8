package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

func TestAdmitBootSlots(t *testing.T) {
	rt, err := NewRuntime(WithHome(t.TempDir()), WithMaxConcurrentBoots(1))
	if err != nil {
		t.Fatal(err)
	}
	release, err := rt.admitBoot(context.Background(), "a")
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
	if _, err := rt2.admitBoot(ctx, "b"); !errors.Is(err, errdefs.ErrTimeout) {
		t.Fatalf("second boot while the only slot is held: %v; want a timeout", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := rt2.admitBoot(context.Background(), "b")
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
