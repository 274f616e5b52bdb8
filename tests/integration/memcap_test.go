package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// A runtime with a running-memory cap of two boxes' memory: a third box's
// start pauses the least recently used idle one; an exec into that one
// resumes it (pausing the next least recently used), with its state; a box
// running a command is never the one paused, and when every running box
// is busy a start fails with ErrLimit naming the cap.
func TestRunningMemoryCap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const mem = 256
	capped, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithRunningMemoryCapMiB(2*mem))
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	if _, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithRunningMemoryCapMiB(-1)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a negative cap: %v; want invalid argument", err)
	}
	box := func(name string) *boxlite.Box {
		b, err := boxtest.CreateStarted(ctx, capped, "alpine:latest", boxlite.WithMemoryMiB(mem), boxlite.WithName(name), boxlite.WithAutoRemove(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(context.Background(), true) })
		return b
	}
	states := func() string {
		var s []string
		for _, n := range []string{"cap-a", "cap-b", "cap-c"} {
			b, err := capped.Get(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, n+"="+string(b.State()))
		}
		return strings.Join(s, " ")
	}
	a, b := box("cap-a"), box("cap-b")
	runIn(t, b, sh("echo b > /tmp/mark"))
	runIn(t, a, sh("echo a > /tmp/mark")) // a is now the more recently used
	c := box("cap-c")
	if got, want := states(), "cap-a=running cap-b=paused cap-c=running"; got != want {
		t.Fatalf("after the third start: %s; want %s", got, want)
	}
	// b's next exec resumes it with its files; a, used before c started,
	// is paused for it.
	if res := runIn(t, b, sh("cat /tmp/mark")); string(res.Stdout) != "b\n" {
		t.Fatalf("b after its resume: %q", res.Stdout)
	}
	if got, want := states(), "cap-a=paused cap-b=running cap-c=running"; got != want {
		t.Fatalf("after b's exec: %s; want %s", got, want)
	}
	// c runs a command while b's is done: resuming a pauses b, not c.
	ex, err := c.Exec(ctx, sh("sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Kill()
	if res := runIn(t, a, sh("cat /tmp/mark")); string(res.Stdout) != "a\n" {
		t.Fatalf("a after its resume: %q", res.Stdout)
	}
	if got, want := states(), "cap-a=running cap-b=paused cap-c=running"; got != want {
		t.Fatalf("after a's exec with c busy: %s; want %s", got, want)
	}
	// With a and c both busy, b cannot resume: ErrLimit, naming the cap.
	ex2, err := a.Exec(ctx, sh("sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	defer ex2.Kill()
	if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "running-memory cap") {
		t.Fatalf("b's exec with every running box busy: %v; want ErrLimit naming the cap", err)
	}
	if s := b.State(); s != boxlite.StatePaused {
		t.Fatalf("b after the refused resume: %s; want paused, as it was", s)
	}
}
