package integration

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Interrupting a shell session's command signals its process group through
// the agent (protocol.Signal.Group), with no shell of the box's: this box
// has no /bin/sh at all (issue 19; the session used to run `sh -c kill`,
// which failed here and killed the shell with its state).
func TestSessionInterruptWithoutSh(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	if r := runIn(t, b, boxlite.Command{Argv: []string{"rm", "/bin/sh"}}); r.Code != 0 {
		t.Fatalf("rm /bin/sh: exit %d %s", r.Code, r.Stderr)
	}
	if r, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "true"}}); err == nil && r.Code == 0 {
		t.Fatal("the box still runs sh")
	}

	t.Run("execution", func(t *testing.T) {
		// A signal to the group reaches the shell's foreground child (it says
		// ready once it runs); one to the shell alone would wait for the
		// sleep to end before the trap runs.
		e, err := b.Exec(ctx, boxlite.Command{Argv: []string{"/bin/ash", "-c", `trap 'echo trapped' INT; /bin/ash -c 'echo ready; exec sleep 600'; echo after; exit 3`}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ready := make([]byte, len("ready\n"))
		if _, err := io.ReadFull(e.Stdout, ready); err != nil || string(ready) != "ready\n" {
			t.Fatalf("%q %v", ready, err)
		}
		if err := e.SignalGroup(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(e.Stdout)
		wctx, wcancel := context.WithTimeout(ctx, time.Minute) // a deadline well short of the sleep
		defer wcancel()
		st, err := e.Wait(wctx)
		if err != nil || st.Code != 3 || string(rest) != "trapped\nafter\n" {
			t.Fatalf("exit %+v, stdout %q, err %v", st, rest, err)
		}
	})

	t.Run("shell session", func(t *testing.T) {
		s, err := b.NewShellSession(ctx, boxlite.SessionOptions{Shell: "/bin/ash", Grace: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Exec(ctx, []string{"cd", "/tmp"}, nil, time.Minute); err != nil {
			t.Fatal(err)
		}
		r, err := s.Exec(ctx, []string{"sleep", "600"}, nil, time.Second)
		if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, boxlite.ErrSessionRestarted) || !r.TimedOut || r.Code != 130 {
			t.Fatalf("want the command interrupted, the shell kept: %v %+v", err, r)
		}
		// Interrupt, as an SDK's cancellation does.
		done := make(chan error, 1)
		go func() {
			_, err := s.Exec(ctx, []string{"/bin/ash", "-c", "echo > /tmp/started; exec sleep 600"}, nil, 0)
			done <- err
		}()
		for deadline := time.Now().Add(time.Minute); ; {
			if r := runIn(t, b, boxlite.Command{Argv: []string{"cat", "/tmp/started"}}); r.Code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the command did not start")
			}
			time.Sleep(100 * time.Millisecond)
		}
		s.Interrupt()
		select {
		case err := <-done:
			if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, boxlite.ErrSessionRestarted) {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("the interrupt did not stop the command")
		}
		r, err = s.Exec(ctx, []string{"pwd"}, nil, time.Minute)
		if err != nil || string(r.Stdout) != "/tmp\n" || s.Restarts() != 0 {
			t.Fatalf("state lost: %q %v, restarts %d", r.Stdout, err, s.Restarts())
		}
	})
}
