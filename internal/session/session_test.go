package session

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// These tests drive sessions over local processes (python3 and sh of the
// host) instead of a box's executions: the session logic and the driver are
// the same; tests/integration/session_test.go runs them in real boxes.

type localProc struct {
	cmd             *exec.Cmd
	in              *os.File
	out, errr       *os.File
	waited          chan struct{}
	st              ExitStatus
	closeOnce, once sync.Once
}

func (p *localProc) Stdin() io.WriteCloser { return p.in }
func (p *localProc) Stdout() io.Reader     { return p.out }
func (p *localProc) Stderr() io.Reader     { return p.errr }
func (p *localProc) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}
func (p *localProc) SignalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}
func (p *localProc) Kill() error {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.closeOnce.Do(func() {
		p.in.Close()
	})
	return nil
}
func (p *localProc) Wait() (ExitStatus, error) {
	<-p.waited
	return p.st, nil
}

func localStarter(t *testing.T) Starter {
	return func(ctx context.Context, argv []string, o Options) (Process, error) {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ErrNotFound, "%s", argv[0])
		}
		cmd := exec.Command(path, argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Dir = o.Cwd
		cmd.Env = os.Environ()
		for k, v := range o.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		errR, errW, _ := os.Pipe()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		inR.Close()
		outW.Close()
		errW.Close()
		p := &localProc{cmd: cmd, in: inW, out: outR, errr: errR, waited: make(chan struct{})}
		go func() {
			ps, _ := cmd.Process.Wait()
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.st = ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
			} else {
				p.st = ExitStatus{Code: ps.ExitCode()}
			}
			close(p.waited)
		}()
		t.Cleanup(func() { p.Kill() })
		return p, nil
	}
}

func needPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("no python3 on this host")
	}
}

func newTestSession(t *testing.T, o Options) *Python {
	t.Helper()
	needPython(t)
	if o.Python == "" {
		o.Python = "python3"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := NewPython(ctx, localStarter(t), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t *testing.T, s *Python, code string) CellResult {
	t.Helper()
	r, err := s.Run(context.Background(), code, 30*time.Second)
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	return r
}

func TestSessionKeepsState(t *testing.T) {
	s := newTestSession(t, Options{})
	if r := run(t, s, "import json\ndef process(data):\n    return {k: v * 2 for k, v in data.items()}\n"); len(r.Stdout) != 0 || r.Error != nil {
		t.Fatalf("definition: %+v", r)
	}
	r := run(t, s, "output = process({\"a\": 1, \"b\": 2, \"c\": 3})\nprint(json.dumps(output))")
	if string(r.Stdout) != "{\"a\": 2, \"b\": 4, \"c\": 6}\n" {
		t.Fatalf("stdout %q (%+v)", r.Stdout, r.Error)
	}
	// __main__, blank lines inside blocks, no trailing newline, a trailing value.
	r = run(t, s, "if __name__ == \"__main__\":\n    a = 1\n\n    print('main', end='')\nimport sys\nprint('err', file=sys.stderr)\na + 41")
	if string(r.Stdout) != "main" || string(r.Stderr) != "err\n" || r.Value == nil || *r.Value != "42" {
		t.Fatalf("got %q %q %v", r.Stdout, r.Stderr, r.Value)
	}
	if r := run(t, s, "x = None\nx"); r.Value != nil {
		t.Fatalf("None has no value: %q", *r.Value)
	}
	if r := run(t, s, "'a' * 3"); r.Value == nil || *r.Value != "'aaa'" {
		t.Fatalf("repr: %+v", r)
	}
	// Output that bypasses sys.stdout: fd 1 itself, and a child process.
	r = run(t, s, "import os, subprocess\nos.write(1, b'raw\\n')\nsubprocess.run(['sh', '-c', 'echo child; echo cerr >&2'])")
	if string(r.Stdout) != "raw\nchild\n" || string(r.Stderr) != "cerr\n" {
		t.Fatalf("got %q %q", r.Stdout, r.Stderr)
	}
	// Stdin is not the protocol.
	if r := run(t, s, "import sys\nprint(repr(sys.stdin.read()))"); string(r.Stdout) != "''\n" {
		t.Fatalf("stdin: %q", r.Stdout)
	}
}

func TestSessionErrors(t *testing.T) {
	s := newTestSession(t, Options{})
	r := run(t, s, "def f():\n    raise ValueError('bad input')\n\nprint('before')\nf()")
	if r.Error == nil || r.Error.Type != "ValueError" || r.Error.Message != "bad input" || r.ExitCode != 1 {
		t.Fatalf("%+v %+v", r, r.Error)
	}
	want := "Traceback (most recent call last):\n  File \"<cell-1>\", line 5, in <module>\n    f()\n  File \"<cell-1>\", line 2, in f\n    raise ValueError('bad input')\nValueError: bad input\n"
	if r.Error.Traceback != want || string(r.Stdout) != "before\n" {
		t.Fatalf("traceback %q, stdout %q", r.Error.Traceback, r.Stdout)
	}
	r = run(t, s, "class MyError(Exception): pass\nraise MyError('x')")
	if r.Error == nil || r.Error.Type != "MyError" {
		t.Fatalf("%+v", r.Error)
	}
	r = run(t, s, "import json\njson.loads('{')")
	if r.Error == nil || r.Error.Type != "json.decoder.JSONDecodeError" {
		t.Fatalf("%+v", r.Error)
	}
	r = run(t, s, "if")
	if r.Error == nil || r.Error.Type != "SyntaxError" || !strings.Contains(r.Error.Traceback, "<cell-4>") {
		t.Fatalf("%+v", r.Error)
	}
	r = run(t, s, "import sys; sys.exit(7)")
	if r.Error == nil || r.Error.Type != "SystemExit" || r.ExitCode != 7 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, s, "import sys; sys.exit(0)"); r.Error != nil || r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, s, "print('still here')"); string(r.Stdout) != "still here\n" {
		t.Fatalf("%q", r.Stdout)
	}
}

func TestSessionTimeoutKeepsState(t *testing.T) {
	s := newTestSession(t, Options{})
	run(t, s, "x = 1")
	t0 := time.Now()
	r, err := s.Run(context.Background(), "print('start', flush=True)\nwhile True: pass", 500*time.Millisecond)
	if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, ErrRestarted) {
		t.Fatalf("want a timeout, state kept: %v", err)
	}
	if !r.TimedOut || r.Restarted || r.Error == nil || r.Error.Type != "KeyboardInterrupt" || string(r.Stdout) != "start\n" {
		t.Fatalf("%+v %+v", r, r.Error)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	if r := run(t, s, "print(x)"); string(r.Stdout) != "1\n" {
		t.Fatalf("state lost: %q", r.Stdout)
	}
	// time.sleep is interrupted too.
	if _, err := s.Run(context.Background(), "import time; time.sleep(60)", 300*time.Millisecond); !errors.Is(err, errdefs.ErrTimeout) {
		t.Fatal(err)
	}
	// ctx cancellation interrupts like a timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.Run(ctx, "while True: pass", 0); !errors.Is(err, errdefs.ErrTimeout) {
		t.Fatal(err)
	}
	if s.Restarts() != 0 {
		t.Fatalf("restarts %d", s.Restarts())
	}
}

func TestSessionKillsCellIgnoringInterrupt(t *testing.T) {
	s := newTestSession(t, Options{Grace: 500 * time.Millisecond})
	run(t, s, "x = 1")
	pid := s.Pid()
	r, err := s.Run(context.Background(), "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ignoring', flush=True)\nwhile True: pass", 300*time.Millisecond)
	if !errors.Is(err, errdefs.ErrTimeout) || !errors.Is(err, ErrRestarted) || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("want timeout + restarted: %v", err)
	}
	if !r.Restarted || !r.TimedOut || string(r.Stdout) != "ignoring\n" {
		t.Fatalf("%+v", r)
	}
	r = run(t, s, "print('x' in globals())")
	if string(r.Stdout) != "False\n" || s.Restarts() != 1 || s.Pid() == pid {
		t.Fatalf("after restart: %q restarts %d", r.Stdout, s.Restarts())
	}
}

func TestSessionInterpreterExit(t *testing.T) {
	s := newTestSession(t, Options{})
	run(t, s, "x = 1")
	r, err := s.Run(context.Background(), "import os\nprint('bye', flush=True)\nos._exit(3)", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Restarted || r.ExitCode != 3 || r.Error == nil || r.Error.Type != "InterpreterExited" || string(r.Stdout) != "bye\n" {
		t.Fatalf("%+v %+v", r, r.Error)
	}
	if r := run(t, s, "print('x' in globals())"); string(r.Stdout) != "False\n" {
		t.Fatalf("%q", r.Stdout)
	}
}

func TestSessionLargeOutputAndStream(t *testing.T) {
	s := newTestSession(t, Options{})
	r := run(t, s, "import sys\nsys.stdout.write('x' * 5_000_000)\nfor i in range(100000): print(i, file=sys.stderr)")
	if len(r.Stdout) != 5_000_000 || !strings.HasSuffix(string(r.Stderr), "\n99999\n") {
		t.Fatalf("stdout %d bytes, stderr tail %q", len(r.Stdout), r.Stderr[max(0, len(r.Stderr)-20):])
	}
	c, err := s.RunStream(context.Background(), "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\n'done'", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ch, err := c.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			select {
			case <-c.Done():
				t.Fatal("first chunk only after the end")
			default:
			}
		}
		got = append(got, string(ch.Data))
	}
	res, err := c.Result(context.Background())
	if err != nil || strings.Join(got, "") != "0\n1\n2\n" || res.Value == nil || *res.Value != "'done'" || len(res.Stdout) != 0 {
		t.Fatalf("%q %+v %v", got, res, err)
	}
	// Unread output holds the cell back but never deadlocks: Result drains it.
	c, _ = s.RunStream(context.Background(), "print('y' * 3_000_000)", 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	if res, err := c.Result(context.Background()); err != nil || len(res.Stdout) != 3_000_001 {
		t.Fatalf("%d %v", len(res.Stdout), err)
	}
}

func TestSessionResetCloseAndMany(t *testing.T) {
	s := newTestSession(t, Options{})
	s2 := newTestSession(t, Options{Env: map[string]string{"BX_TEST": "two"}})
	run(t, s, "x = 'one'")
	run(t, s2, "import os\nx = os.environ['BX_TEST']")
	if r := run(t, s, "x"); *r.Value != "'one'" {
		t.Fatal(*r.Value)
	}
	if r := run(t, s2, "x"); *r.Value != "'two'" {
		t.Fatal(*r.Value)
	}
	// Concurrent runs take turns.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(t, s, "import time\nn = globals().get('n', 0)\ntime.sleep(0.05)\nn += 1")
		}()
	}
	wg.Wait()
	if r := run(t, s, "n"); *r.Value != "4" {
		t.Fatalf("n = %s", *r.Value)
	}
	if err := s.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := run(t, s, "'x' in globals()"); *r.Value != "False" || s.Restarts() != 1 {
		t.Fatalf("%s restarts %d", *r.Value, s.Restarts())
	}
	// Close under a running cell.
	c, err := s.RunStream(context.Background(), "import time; time.sleep(60)", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-c.started
	s.Close()
	if _, err := c.Result(context.Background()); !errors.Is(err, errdefs.ErrClosed) {
		t.Fatalf("want closed: %v", err)
	}
	if _, err := s.Run(context.Background(), "1", 0); !errors.Is(err, errdefs.ErrClosed) {
		t.Fatalf("want closed: %v", err)
	}
}

func TestSessionStartup(t *testing.T) {
	needPython(t)
	// A sitecustomize that prints before the driver runs is not protocol.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte("print('hello from site\\x00\\x01')\n"), 0o644)
	s := newTestSession(t, Options{Env: map[string]string{"PYTHONPATH": dir}})
	if r := run(t, s, "print(1)"); string(r.Stdout) != "1\n" {
		t.Fatalf("%q", r.Stdout)
	}
	_, err := NewPython(context.Background(), localStarter(t), Options{Python: "no-such-python"}, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("want not found: %v", err)
	}
	// An interpreter that fails says why.
	_, err = NewPython(context.Background(), localStarter(t), Options{Python: "false"}, nil)
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("%v", err)
	}
}

func newTestShell(t *testing.T) *Shell {
	t.Helper()
	s, err := NewShell(context.Background(), localStarter(t), Options{Grace: 500 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func shExec(t *testing.T, s *Shell, argv ...string) *ShellResult {
	t.Helper()
	r, err := s.Exec(context.Background(), argv, nil, 10*time.Second, 0)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return r
}

func TestShellSession(t *testing.T) {
	s := newTestShell(t)
	shExec(t, s, "cd", "/tmp")
	shExec(t, s, "export", "A=1")
	r := shExec(t, s, "sh", "-c", "pwd; echo $A")
	if string(r.Stdout) != "/tmp\n1\n" || r.Code != 0 {
		t.Fatalf("%q %d", r.Stdout, r.Code)
	}
	shExec(t, s, "eval", "B=2; f() { echo \"f:$1\"; }")
	if r := shExec(t, s, "eval", "echo $B; f x"); string(r.Stdout) != "2\nf:x\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if r := shExec(t, s, "f", "y"); string(r.Stdout) != "f:y\n" {
		t.Fatalf("%q", r.Stdout)
	}
	// Each argument is one word, nothing expanded.
	if r := shExec(t, s, "printf", "%s|", "$(id)", "a'b", "x y", "*", ""); string(r.Stdout) != "$(id)|a'b|x y|*||" {
		t.Fatalf("%q", r.Stdout)
	}
	r = shExec(t, s, "sh", "-c", "echo out; printf err >&2; exit 3")
	if r.Code != 3 || string(r.Stdout) != "out\n" || string(r.Stderr) != "err" {
		t.Fatalf("%+v %q %q", r.ExitStatus, r.Stdout, r.Stderr)
	}
	if r := shExec(t, s, "no-such-command"); r.Code != 127 || len(r.Stderr) == 0 {
		t.Fatalf("%+v %q", r.ExitStatus, r.Stderr)
	}
	// A failing special builtin does not end the shell.
	if r := shExec(t, s, "eval", "if"); r.Code == 0 {
		t.Fatal("syntax error succeeded")
	}
	if r := shExec(t, s, "export", "1=2"); r.Code == 0 {
		t.Fatal("bad export succeeded")
	}
	// env is for one command only.
	r, err := s.Exec(context.Background(), []string{"sh", "-c", "echo $C"}, map[string]string{"C": "it's"}, 0, 0)
	if err != nil || string(r.Stdout) != "it's\n" {
		t.Fatalf("%q %v", r.Stdout, err)
	}
	if r := shExec(t, s, "sh", "-c", "echo \"[$C]\""); string(r.Stdout) != "[]\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if _, err := s.Exec(context.Background(), []string{"true"}, map[string]string{"A B": "x"}, 0, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatal(err)
	}
	// Stdin is not the shell's.
	if r := shExec(t, s, "cat"); len(r.Stdout) != 0 || r.Code != 0 {
		t.Fatalf("%q", r.Stdout)
	}
	if r := shExec(t, s, "pwd"); string(r.Stdout) != "/tmp\n" {
		t.Fatalf("%q", r.Stdout)
	}
	// A large output.
	if r := shExec(t, s, "sh", "-c", "head -c 3000000 /dev/zero"); len(r.Stdout) != 3000000 {
		t.Fatal(len(r.Stdout))
	}
}

func TestShellSessionTimeoutAndExit(t *testing.T) {
	s := newTestShell(t)
	shExec(t, s, "cd", "/tmp")
	r, err := s.Exec(context.Background(), []string{"sleep", "60"}, nil, 300*time.Millisecond, 0)
	if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, ErrRestarted) || !r.TimedOut || r.Code != 130 {
		t.Fatalf("%v %+v", err, r)
	}
	if r := shExec(t, s, "pwd"); string(r.Stdout) != "/tmp\n" {
		t.Fatalf("state lost: %q", r.Stdout)
	}
	r, err = s.Exec(context.Background(), []string{"sh", "-c", "trap '' INT; sleep 60"}, nil, 300*time.Millisecond, 0)
	if !errors.Is(err, errdefs.ErrTimeout) || !errors.Is(err, ErrRestarted) {
		t.Fatalf("%v %+v", err, r)
	}
	if r := shExec(t, s, "pwd"); string(r.Stdout) == "/tmp\n" || s.Restarts() != 1 {
		t.Fatalf("not restarted: %q", r.Stdout)
	}
	shExec(t, s, "cd", "/tmp")
	if r := shExec(t, s, "exit", "4"); r.Code != 4 {
		t.Fatalf("%+v", r.ExitStatus)
	}
	if r := shExec(t, s, "pwd"); string(r.Stdout) == "/tmp\n" || r.Code != 0 {
		t.Fatalf("%q", r.Stdout)
	}
	if err := s.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Exec(context.Background(), []string{"true"}, nil, 0, 0); !errors.Is(err, errdefs.ErrClosed) {
		t.Fatal(err)
	}
}

func TestSessionInterrupt(t *testing.T) {
	s := newTestSession(t, Options{})
	run(t, s, "x = 5")
	s.Interrupt() // idle: nothing happens
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), "import time; time.sleep(60)", 0)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	s.Interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, ErrRestarted) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interrupt did not stop the cell")
	}
	if r := run(t, s, "x"); *r.Value != "5" {
		t.Fatal(*r.Value)
	}

	sh := newTestShell(t)
	shExec(t, sh, "cd", "/tmp")
	sh.Interrupt()
	go func() {
		_, err := sh.Exec(context.Background(), []string{"sleep", "60"}, nil, 0, 0)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	sh.Interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, ErrRestarted) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interrupt did not stop the command")
	}
	if r := shExec(t, sh, "pwd"); string(r.Stdout) != "/tmp\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if _, err := sh.Exec(context.Background(), []string{"echo", strings.Repeat("x", 2<<20)}, nil, 0, 0); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatal(err)
	}
}

func TestSessionForkAndClosedStreams(t *testing.T) {
	s := newTestSession(t, Options{})
	// A forked child that does not exit ends with the cell; the session goes on.
	r := run(t, s, "import os, time\npid = os.fork()\nif pid == 0:\n    print('child', flush=True)\nelse:\n    os.waitpid(pid, 0)\n    print('parent')")
	if got := string(r.Stdout); got != "child\nparent\n" {
		t.Fatalf("%q", got)
	}
	if r := run(t, s, "print(os.getpid() == pid)"); string(r.Stdout) != "False\n" {
		t.Fatalf("%q", r.Stdout)
	}
	// exit() closes stdin; quit() too: the next cell has its streams back.
	run(t, s, "import sys\nsys.stdin.close()\nsys.stdout.close()")
	if r := run(t, s, "print(repr(input.__name__), sys.stdin.read())"); string(r.Stdout) != "'input' \n" {
		t.Fatalf("%q %+v", r.Stdout, r.Error)
	}
}
