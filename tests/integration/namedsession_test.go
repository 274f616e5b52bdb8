package integration

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// cell runs code in s and returns its stdout, failing on an error.
func cell(t *testing.T, ctx context.Context, s *boxlite.Session, code string) string {
	t.Helper()
	r, err := s.Run(ctx, code, 2*time.Minute)
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	if r.Error != nil {
		t.Fatalf("run %q: %+v", code, r.Error)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// A named session outlives its client: the runtime that started it closes
// and the box pauses; a new runtime resumes the box by name and a session
// of the same name takes the interpreter over (same pid, its variables and
// an open file). While one client holds it, another is refused; Reset
// starts a fresh one under the name. In each fork of the box, a session of
// that name has its own copy of the interpreter.
func TestNamedSessionOutlivesItsClient(t *testing.T) {
	needPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	home := os.Getenv("BOXLITE_TEST_HOME")
	rt1, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	b1, err := boxtest.CreateStarted(ctx, rt1, "python:slim", boxlite.WithName("named-session"), boxlite.WithDetach())
	if err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b1.ID(), true) })
	opts := boxlite.SessionOptions{Name: "main"}
	s1, err := b1.NewPythonSession(ctx, opts)
	if err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	cell(t, ctx, s1, "x = 42\nf = open('/tmp/notes', 'w+')\nf.write('kept open')\nf.flush()\nimport os")
	pid := s1.Pid()
	if _, err := b1.NewPythonSession(ctx, opts); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second client of the held session: %v, want ErrAlreadyExists", err)
	}
	if _, err := b1.NewPythonSession(ctx, boxlite.SessionOptions{Name: "bad/name"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a bad name: %v, want ErrInvalidArgument", err)
	}
	if _, err := b1.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	rt1.Close() // the client is gone; the box sleeps

	rt2, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	b2, err := rt2.Get(ctx, "named-session")
	if err != nil {
		t.Fatal(err)
	}
	if b2.State() != boxlite.StatePaused {
		t.Fatalf("state %s, want paused", b2.State())
	}
	s2, err := b2.NewPythonSession(ctx, opts) // resumes the box
	if err != nil {
		t.Fatal(err)
	}
	if s2.Pid() != pid {
		t.Fatalf("took over pid %d, the interpreter was %d", s2.Pid(), pid)
	}
	if got := cell(t, ctx, s2, "f.seek(0)\nprint(x, f.read(), os.getpid())"); got != "42 kept open "+strconv.Itoa(pid) {
		t.Fatalf("the session taken over printed %q", got)
	}
	// A shell session of the same name is another process.
	sh2, err := b2.NewShellSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sh2.Exec(ctx, []string{"cd", "/tmp"}, nil, time.Minute); err != nil || r.Code != 0 {
		t.Fatalf("cd: %+v %v", r, err)
	}
	sh2.Close()

	forks, err := b2.Fork(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		t.Cleanup(func() { f.Remove(context.Background(), true) })
	}
	boots := map[string]bool{}
	for i, f := range forks {
		fs, err := f.NewPythonSession(ctx, opts)
		if err != nil {
			t.Fatalf("fork %d: %v", i, err)
		}
		if got := cell(t, ctx, fs, "print(x)"); got != "42" {
			t.Fatalf("fork %d: x is %q", i, got)
		}
		cell(t, ctx, fs, "x = "+strconv.Itoa(100+i))
		boot := cell(t, ctx, fs, "print(open('/proc/sys/kernel/random/boot_id').read())")
		if boots[boot] {
			t.Fatalf("fork %d: boot id %s seen before", i, boot)
		}
		boots[boot] = true
		fsh, err := f.NewShellSession(ctx, opts)
		if err != nil {
			t.Fatalf("fork %d shell: %v", i, err)
		}
		if r, err := fsh.Exec(ctx, []string{"pwd"}, nil, time.Minute); err != nil || strings.TrimSpace(string(r.Stdout)) != "/tmp" {
			t.Fatalf("fork %d: the shell's cwd %q %v", i, r.Stdout, err)
		}
		fsh.Close()
		fs.Close()
	}
	if got := cell(t, ctx, s2, "print(x)"); got != "42" {
		t.Fatalf("the source saw a fork's change: x is %q", got)
	}
	// A fork of a fork (its boot id given twice) has the fork's state.
	grand, err := forks[1].Fork(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { grand[0].Remove(context.Background(), true) })
	gs, err := grand[0].NewPythonSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := cell(t, ctx, gs, "print(x)"); got != "101" {
		t.Fatalf("a fork of fork 1: x is %q", got)
	}
	if boot := cell(t, ctx, gs, "print(open('/proc/sys/kernel/random/boot_id').read())"); boots[boot] {
		t.Fatalf("a fork of a fork: boot id %s seen before", boot)
	}
	gs.Close()
	// Reset starts a fresh interpreter under the name.
	if err := s2.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cell(t, ctx, s2, "print('x' in globals())"); got != "False" {
		t.Fatalf("after Reset: %q", got)
	}
	s2.Close()
	s3, err := b2.NewPythonSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if got := cell(t, ctx, s3, "print('x' in globals())"); got != "False" {
		t.Fatalf("the session after Reset and Close: %q", got)
	}
}
