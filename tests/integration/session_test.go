package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Persistent Python sessions in one python:slim box (one boot for all).
func TestPythonSession(t *testing.T) {
	t.Parallel()
	needPython(t)
	ctx := context.Background()
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, true)
	start := time.Now()
	s, err := b.NewPythonSession(ctx, boxlite.SessionOptions{Grace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("session started in %.2fs (Python %s, pid %d)", time.Since(start).Seconds(), s.PythonVersion(), s.Pid())
	run := func(t *testing.T, code string) boxlite.CellResult {
		t.Helper()
		r, err := s.Run(ctx, code, time.Minute)
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		return r
	}

	t.Run("the issue's example", func(t *testing.T) {
		run(t, "import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n")
		r := run(t, "output = process({\"a\": 1, \"b\": 2, \"c\": 3})\nprint(json.dumps(output))")
		if got := string(r.Stdout); got != "{\"a\": 2, \"b\": 4, \"c\": 6}\n" {
			t.Fatalf("stdout %q, error %+v", got, r.Error)
		}
	})

	t.Run("value, main, output without newline", func(t *testing.T) {
		r := run(t, "if __name__ == '__main__':\n    n = 6\n\n    print('as main', end='')\nn * 7")
		if string(r.Stdout) != "as main" || r.Value == nil || *r.Value != "42" {
			t.Fatalf("stdout %q value %v", r.Stdout, r.Value)
		}
		r = run(t, "import sys; sys.executable")
		if r.Value == nil || *r.Value != "'/usr/local/bin/python3'" {
			t.Fatalf("value %v", r.Value)
		}
	})

	t.Run("exception", func(t *testing.T) {
		r := run(t, "def check(v):\n    if v < 0:\n        raise ValueError(f'negative: {v}')\ncheck(-1)")
		if r.Error == nil || r.Error.Type != "ValueError" || r.Error.Message != "negative: -1" || r.ExitCode != 1 {
			t.Fatalf("%+v", r.Error)
		}
		for _, want := range []string{"Traceback (most recent call last):", "line 4, in <module>", "line 3, in check", "ValueError: negative: -1"} {
			if !strings.Contains(r.Error.Traceback, want) {
				t.Errorf("traceback lacks %q:\n%s", want, r.Error.Traceback)
			}
		}
		if strings.Contains(r.Error.Traceback, "boxlite-session") {
			t.Errorf("traceback shows the driver:\n%s", r.Error.Traceback)
		}
	})

	t.Run("large output", func(t *testing.T) {
		start := time.Now()
		r := run(t, "import sys\nsys.stdout.write('x' * 4_000_000)\nfor i in range(20000): print(i)")
		if len(r.Stdout) != 4_000_000+len(lines(20000)) || !strings.HasSuffix(string(r.Stdout), "\n19999\n") {
			t.Fatalf("stdout: %d bytes", len(r.Stdout))
		}
		t.Logf("4 MB + 20000 lines in %.2fs", time.Since(start).Seconds())
	})

	t.Run("timeout interrupts, state kept", func(t *testing.T) {
		run(t, "x = 1")
		t0 := time.Now()
		r, err := s.Run(ctx, "while True: pass", time.Second)
		if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, boxlite.ErrSessionRestarted) || !r.TimedOut {
			t.Fatalf("want a timeout: %v %+v", err, r)
		}
		t.Logf("interrupted after %.2fs: %v", time.Since(t0).Seconds(), err)
		if r := run(t, "print(x)"); string(r.Stdout) != "1\n" {
			t.Fatalf("state lost: %q", r.Stdout)
		}
	})

	t.Run("cell ignoring the interrupt is killed, session restarted", func(t *testing.T) {
		before := s.Restarts()
		r, err := s.Run(ctx, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", time.Second)
		if !errors.Is(err, errdefs.ErrTimeout) || !errors.Is(err, boxlite.ErrSessionRestarted) || !r.Restarted {
			t.Fatalf("want timeout + restart: %v", err)
		}
		if !strings.Contains(err.Error(), "restarted") || !strings.Contains(err.Error(), "gone") {
			t.Errorf("message does not say so: %v", err)
		}
		t.Logf("%v", err)
		if r := run(t, "print('x' in globals())"); string(r.Stdout) != "False\n" {
			t.Fatalf("next run: %q", r.Stdout)
		}
		if s.Restarts() != before+1 {
			t.Fatalf("restarts %d, want %d", s.Restarts(), before+1)
		}
	})

	t.Run("stream", func(t *testing.T) {
		c, err := s.RunStream(ctx, "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		early := false
		for {
			ch, err := c.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.Done():
			default:
				early = true
			}
			got.Write(ch.Data)
		}
		if _, err := c.Result(ctx); err != nil || got.String() != "0\n1\n2\n" || !early {
			t.Fatalf("%q early=%v %v", got.String(), early, err)
		}
	})

	t.Run("independent sessions and reset", func(t *testing.T) {
		s2, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		run(t, "who = 'first'")
		if r, err := s2.Run(ctx, "'who' in globals()", time.Minute); err != nil || *r.Value != "False" {
			t.Fatalf("%v %v", r.Value, err)
		}
		if err := s2.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if r := run(t, "who"); *r.Value != "'first'" {
			t.Fatalf("%v", *r.Value)
		}
		if err := s.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if r := run(t, "'who' in globals()"); *r.Value != "False" {
			t.Fatalf("after reset: %v", *r.Value)
		}
	})

	t.Run("memory", func(t *testing.T) {
		res := runIn(t, b, boxlite.Command{Argv: []string{"grep", "VmRSS", fmt.Sprintf("/proc/%d/status", s.Pid())}})
		t.Logf("interpreter %s", strings.Join(strings.Fields(string(res.Stdout)), " "))
	})
}

func lines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// A shell session in the shared busybox box.
func TestShellSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := shared.NewShellSession(ctx, boxlite.SessionOptions{Grace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exec := func(argv ...string) *boxlite.ExecResult {
		t.Helper()
		r, err := s.Exec(ctx, argv, nil, time.Minute)
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		return r
	}
	exec("cd", "/tmp")
	exec("export", "A=1")
	if r := exec("sh", "-c", "pwd; echo $A"); string(r.Stdout) != "/tmp\n1\n" || r.Code != 0 {
		t.Fatalf("%q exit %d", r.Stdout, r.Code)
	}
	exec("eval", "B=two")
	if r := exec("eval", `echo "$B"`); string(r.Stdout) != "two\n" {
		t.Fatalf("shell variable: %q", r.Stdout)
	}
	r := exec("sh", "-c", "echo out; echo err >&2; exit 3")
	if r.Code != 3 || string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" {
		t.Fatalf("exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := exec("echo", "$A", "it's", "a b"); string(r.Stdout) != "$A it's a b\n" {
		t.Fatalf("quoting: %q", r.Stdout)
	}
	// A timeout interrupts the command; the shell keeps its state.
	r, err = s.Exec(ctx, []string{"sleep", "30"}, nil, time.Second)
	if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, boxlite.ErrSessionRestarted) || !r.TimedOut {
		t.Fatalf("%v %+v", err, r)
	}
	if r := exec("pwd"); string(r.Stdout) != "/tmp\n" {
		t.Fatalf("state lost: %q", r.Stdout)
	}
	// One that ignores SIGINT is killed with the shell.
	_, err = s.Exec(ctx, []string{"sh", "-c", "trap '' INT; sleep 30"}, nil, time.Second)
	if !errors.Is(err, errdefs.ErrTimeout) || !errors.Is(err, boxlite.ErrSessionRestarted) {
		t.Fatal(err)
	}
	if r := exec("pwd"); string(r.Stdout) != "/\n" || s.Restarts() != 1 {
		t.Fatalf("after restart: %q, restarts %d", r.Stdout, s.Restarts())
	}
}
