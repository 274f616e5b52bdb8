package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// A box with WithAutoPause(5s): a command that runs longer than that holds
// it awake (its stream is open); once idle, the box pauses itself and its
// processes are gone; the next exec resumes it as the same machine and
// returns the right output; idle again, it pauses again.
func TestAutoPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithAutoPause(5*time.Second), boxlite.WithAutoRemove(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	res := runIn(t, b, sh(`echo 42 > /tmp/f; cat /proc/sys/kernel/random/boot_id; sleep 7; echo done`))
	info := b.Info() // at once: the box has been busy until now
	out := strings.Fields(string(res.Stdout))
	if len(out) != 2 || out[1] != "done" || info.Runtime == nil {
		t.Fatalf("a command longer than the idle period: %q, box %s (the box paused under it?)", res.Stdout, info.State)
	}
	bootID := out[0]

	for round := 1; round <= 2; round++ {
		dir, shimPid, vmmPid := info.Dir, info.Runtime.ShimPid, info.Runtime.VMMPid
		deadline := time.Now().Add(3 * time.Minute)
		for {
			left := boxProcesses(dir, shimPid, vmmPid)
			if len(left) == 0 && b.State() == boxlite.StatePaused {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the idle box did not pause itself within 3 minutes: state %s, processes %q", round, b.State(), left)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if p := b.Info().Paused; p == nil || p.StateBytes == 0 {
			t.Fatalf("round %d: an auto-paused box has no saved state: %+v", round, b.Info())
		}
		res = runIn(t, b, sh(`cat /tmp/f /proc/sys/kernel/random/boot_id`))
		info = b.Info()
		if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != "42" || got[1] != bootID || info.Runtime == nil {
			t.Fatalf("round %d: after the auto-pause the exec printed %q (box %s), want 42 and boot id %s", round, res.Stdout, info.State, bootID)
		}
	}
}

// An idle Python session lets its box pause itself (its interpreter's
// stream is open but silent); a cell that computes silently for longer
// than the idle period holds the box awake; the next cell resumes the box
// and finds the session's variables.
func TestAutoPauseSession(t *testing.T) {
	needPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim", boxlite.WithAutoPause(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	s, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(code string) string {
		t.Helper()
		r, err := s.Run(ctx, code, 2*time.Minute)
		if err != nil || r.Error != nil || r.Restarted {
			t.Fatalf("run %q: %+v, %v", code, r, err)
		}
		return strings.TrimSpace(string(r.Stdout))
	}
	if got := run("import time\nx = 42\ntime.sleep(7)\nprint('slept')"); got != "slept" {
		t.Fatalf("a silent cell longer than the idle period printed %q", got)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for b.State() != boxlite.StatePaused {
		if time.Now().After(deadline) {
			t.Fatalf("the box with an idle session did not pause itself within 3 minutes: %s", b.State())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := run("print(x)"); got != "42" {
		t.Fatalf("after the auto-pause the session printed %q, want 42", got)
	}
}
