//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

const wait = 20 * time.Second

var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

// serve runs an agent over net.Pipe with cfg and returns the host side after
// the Hello. The agent is stopped when the test ends.
func serve(t *testing.T, cfg Config) (*testhost.Host, chan error) {
	t.Helper()
	agentSide, hostSide := net.Pipe()
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	cfg.Hello = protocol.Hello{Version: protocol.Version, Agent: "test"}
	done := make(chan error, 1)
	go func() { done <- Serve(agentSide, cfg) }()
	h := testhost.New(hostSide)
	t.Cleanup(func() {
		hostSide.Close()
		agentSide.Close()
		<-done
	})
	hello, err := h.Hello(wait)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.Version != protocol.Version || hello.Agent != "test" {
		t.Fatalf("hello %+v", hello)
	}
	return h, done
}

func sh(script string) protocol.Exec {
	return protocol.Exec{Argv: []string{"sh", "-c", script}, Env: testEnv}
}

func run(t *testing.T, h *testhost.Host, e protocol.Exec) testhost.Result {
	t.Helper()
	if e.Env == nil {
		e.Env = testEnv
	}
	res, err := h.Run(e, nil, wait)
	if err != nil {
		t.Fatalf("run %q: %v", e.Argv, err)
	}
	return res
}

func wantExit(t *testing.T, res testhost.Result, code int) {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("error frame: %v", res.Err)
	}
	if res.Exit == nil || res.Exit.Code != code {
		t.Fatalf("exit %+v, want code %d (stdout %q stderr %q)", res.Exit, code, res.Stdout, res.Stderr)
	}
}

func wantErr(t *testing.T, res testhost.Result, kind error, msg string) {
	t.Helper()
	if res.Err == nil {
		t.Fatalf("want %v error, got exit %+v", kind, res.Exit)
	}
	if !errors.Is(res.Err, kind) || !strings.Contains(res.Err.Error(), msg) {
		t.Fatalf("error %q (kind %s), want kind %v containing %q", res.Err, errdefs.KindOf(res.Err), kind, msg)
	}
}

func TestExecEcho(t *testing.T) {
	h, _ := serve(t, Config{})
	res := run(t, h, protocol.Exec{Argv: []string{"echo", "hello", "world"}})
	wantExit(t, res, 0)
	if string(res.Stdout) != "hello world\n" || len(res.Stderr) != 0 || res.Pid <= 0 {
		t.Fatalf("%+v", res)
	}
}

func TestStdoutStderrAndExitCodes(t *testing.T) {
	h, _ := serve(t, Config{})
	res := run(t, h, sh("echo out; echo err >&2; exit 3"))
	wantExit(t, res, 3)
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	res = run(t, h, sh("kill -KILL $$"))
	if res.Exit == nil || res.Exit.Signal != 9 || res.Exit.Code != 137 || res.Exit.TimedOut {
		t.Fatalf("killed: %+v", res.Exit)
	}
	// Env replaces the environment; Cwd applies; HOME is left alone when given.
	res = run(t, h, protocol.Exec{Argv: []string{"sh", "-c", `echo "$FOO:$HOME:$(pwd)"`},
		Env: append([]string{"FOO=bar", "HOME=/h"}, testEnv...), Cwd: "/tmp"})
	wantExit(t, res, 0)
	if string(res.Stdout) != "bar:/h:/tmp\n" {
		t.Fatalf("env/cwd: %q", res.Stdout)
	}
}

func TestStdinStreaming(t *testing.T) {
	h, _ := serve(t, Config{})
	// Small stdin in one go.
	res, err := h.Run(protocol.Exec{Argv: []string{"cat"}, Env: testEnv}, []byte("abc\n"), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if string(res.Stdout) != "abc\n" || res.StdinCredit != 4 {
		t.Fatalf("cat: %q credit %d", res.Stdout, res.StdinCredit)
	}

	// 3 MB through sha256sum... use cat | wc -c to keep it tool-light: the
	// host keeps within its stdin window using the agent's fd-0 credits.
	const total = 3 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), total/16)
	s, err := h.Exec(protocol.Exec{Argv: []string{"sh", "-c", "cat | wc -c"}, Env: testEnv, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	credits := make(chan int, 1024)
	s.OnStdinCredit = func(n int) { credits <- n }
	sendErr := make(chan error, 1)
	go func() {
		window := protocol.InitialWindow
		rest := data
		for len(rest) > 0 {
			for window <= 0 {
				window += <-credits
			}
			n := min(len(rest), protocol.MaxChunk, window)
			if err := s.SendRaw(protocol.TStdin, rest[:n]); err != nil {
				sendErr <- err
				return
			}
			window -= n
			rest = rest[n:]
		}
		sendErr <- s.Send(protocol.TStdinClose, nil)
	}()
	res, err = s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(total) {
		t.Fatalf("wc -c said %q, want %d", res.Stdout, total)
	}
	if res.StdinCredit != total {
		t.Fatalf("stdin credit %d, want %d", res.StdinCredit, total)
	}

	// Stdin sent to a process that does not read it is credited, not queued for ever.
	res, err = h.Run(protocol.Exec{Argv: []string{"true"}, Env: testEnv}, bytes.Repeat([]byte("x"), 200<<10), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
}

func TestStdinBeyondWindowFails(t *testing.T) {
	h, _ := serve(t, Config{})
	s, err := h.Exec(protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, protocol.MaxChunk)
	for i := 0; i < 2*protocol.InitialWindow/protocol.MaxChunk; i++ { // ignoring credit
		if err := s.SendRaw(protocol.TStdin, chunk); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, errdefs.ErrLimit, "window")
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestFlowControl(t *testing.T) {
	h, _ := serve(t, Config{})
	const n = 720000 // about 5 MB
	want := seqOutput(n)
	s, err := h.Exec(protocol.Exec{Argv: []string{"seq", "1", strconv.Itoa(n)}, Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	outstanding, maxOutstanding, stalls := 0, 0, 0
	for {
		f, err := s.Next(200 * time.Millisecond)
		if err == testhost.ErrTimeout {
			// Nothing arrives while the window is used up: the agent waits.
			if outstanding != protocol.InitialWindow {
				t.Fatalf("agent stalled with %d bytes outstanding, window %d", outstanding, protocol.InitialWindow)
			}
			stalls++
			// Grant credit slowly, in small steps.
			for i := 0; i < 4; i++ {
				if err := s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: 16 << 10}); err != nil {
					t.Fatal(err)
				}
				outstanding -= 16 << 10
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == protocol.TStarted {
			continue
		}
		if f.Type == protocol.TExit {
			break
		}
		if f.Type != protocol.TStdout {
			t.Fatalf("unexpected %s", f.Type)
		}
		got.Write(f.Payload)
		outstanding += len(f.Payload)
		maxOutstanding = max(maxOutstanding, outstanding)
		if outstanding > protocol.InitialWindow {
			t.Fatalf("agent sent %d bytes beyond the credit it had", outstanding-protocol.InitialWindow)
		}
		if got.Len() > 1<<20 && stalls > 0 {
			// Enough slow crediting seen; credit the rest generously.
			if err := s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)}); err != nil {
				t.Fatal(err)
			}
			outstanding -= len(f.Payload)
		}
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("got %d bytes, want %d, equal prefix %d", got.Len(), len(want), commonPrefix(got.Bytes(), want))
	}
	if stalls == 0 || maxOutstanding != protocol.InitialWindow {
		t.Fatalf("stalls %d, max outstanding %d", stalls, maxOutstanding)
	}
	t.Logf("%d bytes, %d stalls on an empty window", got.Len(), stalls)
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func TestBackpressureBlocksTheProcess(t *testing.T) {
	h, _ := serve(t, Config{})
	// Without credit the writer must block in write(2) once the window and the
	// pipe are full; it never gets to print "done".
	s, err := h.Exec(sh("head -c 2000000 /dev/zero; echo done >&2"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("%v %v", f.Type, err)
	}
	got := 0
	for {
		f, err := s.Next(500 * time.Millisecond)
		if err == testhost.ErrTimeout {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != protocol.TStdout {
			t.Fatalf("unexpected %s %q", f.Type, f.Payload)
		}
		got += len(f.Payload)
	}
	if got != protocol.InitialWindow {
		t.Fatalf("got %d bytes without credit, want %d", got, protocol.InitialWindow)
	}
	if err := s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: 1 << 24}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if got+len(res.Stdout) != 2000000 || string(res.Stderr) != "done\n" {
		t.Fatalf("stdout %d stderr %q", got+len(res.Stdout), res.Stderr)
	}
}

func TestTimeoutTermThenKill(t *testing.T) {
	h, _ := serve(t, Config{})
	start := time.Now()
	e := sh(`trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done`)
	e.TimeoutMs, e.GraceMs = 300, 400
	res := run(t, h, e)
	el := time.Since(start)
	if res.Exit == nil || !res.Exit.TimedOut || res.Exit.Signal != 9 || res.Exit.Code != 137 {
		t.Fatalf("exit %+v err %v", res.Exit, res.Err)
	}
	if !strings.Contains(string(res.Stdout), "got TERM") {
		t.Fatalf("TERM not delivered first: %q", res.Stdout)
	}
	if el < 700*time.Millisecond || el > 10*time.Second {
		t.Fatalf("took %v, want about 0.7 s", el)
	}

	// A process that dies of TERM reports TERM.
	e = protocol.Exec{Argv: []string{"sleep", "30"}, TimeoutMs: 100}
	res = run(t, h, e)
	if res.Exit == nil || !res.Exit.TimedOut || res.Exit.Signal != 15 || res.Exit.Code != 143 {
		t.Fatalf("exit %+v", res.Exit)
	}
	// Background children in the group holding stdout are killed too.
	e = sh("sleep 30 & sleep 30")
	e.TimeoutMs, e.GraceMs = 100, 100
	res = run(t, h, e)
	if res.Exit == nil || !res.Exit.TimedOut {
		t.Fatalf("exit %+v", res.Exit)
	}
	// Finishing in time is not a timeout.
	e = protocol.Exec{Argv: []string{"true"}, TimeoutMs: 5000}
	res = run(t, h, e)
	if res.Exit == nil || res.Exit.TimedOut || res.Exit.Code != 0 {
		t.Fatalf("exit %+v", res.Exit)
	}
}

// A signal reaches the exec's process: the shell's trap runs. A group
// signal (Signal.Group) reaches the shell's foreground child too (it says
// ready once it runs): the sleep dies and the trap runs at once; to the
// shell alone, it would run only after the sleep.
func TestSignal(t *testing.T) {
	for _, c := range []struct {
		name   string
		script string
		sig    protocol.Signal
		code   int
		stdout string
	}{
		{"process", `trap 'echo int; exit 7' INT; echo ready; while :; do sleep 0.05; done`,
			protocol.Signal{Signal: int(unix.SIGINT)}, 7, "int\n"},
		{"group", `trap 'echo trapped' INT; sh -c 'echo ready; exec sleep 600'; echo after; exit 3`,
			protocol.Signal{Signal: int(unix.SIGINT), Group: true}, 3, "trapped\nafter\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, _ := serve(t, Config{})
			s, err := h.Exec(sh(c.script))
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for !bytes.Contains(out, []byte("ready")) {
				f, err := s.Next(wait)
				if err != nil {
					t.Fatal(err)
				}
				if f.Type == protocol.TStdout {
					out = append(out, f.Payload...)
					_ = s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)})
				}
			}
			if err := s.Send(protocol.TSignal, c.sig); err != nil {
				t.Fatal(err)
			}
			res, err := s.Collect(wait, true)
			if err != nil {
				t.Fatal(err)
			}
			wantExit(t, res, c.code)
			if string(res.Stdout) != c.stdout {
				t.Fatalf("stdout %q", res.Stdout)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	h, _ := serve(t, Config{})
	s := h.Open(42)
	if err := s.Send(protocol.TExec, sh("echo started; exec sleep 30")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("%v %v", f.Type, err)
	}
	var st protocol.Started
	_ = protocol.Decode(f, &st)
	if f, err = s.Next(wait); err != nil || string(f.Payload) != "started\n" {
		t.Fatalf("%v %q %v", f.Type, f.Payload, err)
	}
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}
	// No frame follows a cancel, and the process is killed and reaped.
	if f, err := s.Next(300 * time.Millisecond); err != testhost.ErrTimeout {
		t.Fatalf("frame after cancel: %v %v", f.Type, err)
	}
	deadline := time.Now().Add(wait)
	for unix.Kill(st.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still exists after cancel", st.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stream id is free again at once.
	h.Forget(s)
	s = h.Open(42)
	if err := s.Send(protocol.TExec, protocol.Exec{Argv: []string{"echo", "again"}, Env: testEnv}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if string(res.Stdout) != "again\n" {
		t.Fatalf("%q", res.Stdout)
	}
}

func TestSpawnErrors(t *testing.T) {
	h, _ := serve(t, Config{})
	res := run(t, h, protocol.Exec{Argv: []string{"nosuch"}})
	wantErr(t, res, errdefs.ErrNotFound, `exec "nosuch": executable file not found in $PATH`)
	if res.Err.Error() != `exec "nosuch": executable file not found in $PATH: not found` {
		t.Fatalf("message %q", res.Err)
	}
	res = run(t, h, protocol.Exec{Argv: []string{"/no/such/bin"}})
	wantErr(t, res, errdefs.ErrNotFound, `exec "/no/such/bin": no such file`)
	res = run(t, h, protocol.Exec{Argv: []string{"true"}, Cwd: "/no/such/dir"})
	wantErr(t, res, errdefs.ErrNotFound, `cwd "/no/such/dir"`)
	res = run(t, h, protocol.Exec{Argv: []string{"true"}, User: "no-such-user-xyz"})
	wantErr(t, res, errdefs.ErrNotFound, `user "no-such-user-xyz"`)
	res = run(t, h, protocol.Exec{Argv: []string{"/etc/passwd"}})
	wantErr(t, res, errdefs.ErrInvalidArgument, "permission denied")
	res = run(t, h, protocol.Exec{Argv: []string{"/"}})
	wantErr(t, res, errdefs.ErrInvalidArgument, "is a directory")
	res = run(t, h, protocol.Exec{})
	wantErr(t, res, errdefs.ErrInvalidArgument, "empty argv")
	res = run(t, h, protocol.Exec{Argv: []string{"true", "a\x00b"}})
	wantErr(t, res, errdefs.ErrInvalidArgument, "NUL")
	res = run(t, h, protocol.Exec{Argv: []string{"true"}, TimeoutMs: -1})
	wantErr(t, res, errdefs.ErrInvalidArgument, "timeout")
	// An executable that cannot run (a script with a missing interpreter).
	dir := t.TempDir()
	script := filepath.Join(dir, "bad")
	if err := os.WriteFile(script, []byte("#!/no/such/interp\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = run(t, h, protocol.Exec{Argv: []string{script}})
	wantErr(t, res, errdefs.ErrNotFound, "interpreter")
	// Still serving.
	wantExit(t, run(t, h, protocol.Exec{Argv: []string{"true"}}), 0)
}

func TestNoRoot(t *testing.T) {
	h, _ := serve(t, Config{RootErr: errdefs.Errorf(errdefs.ErrInvalidState, "box has no root file system")})
	res := run(t, h, protocol.Exec{Argv: []string{"true"}})
	wantErr(t, res, errdefs.ErrInvalidState, "no root file system")
}

func TestBadFrames(t *testing.T) {
	h, _ := serve(t, Config{})
	expectErr := func(s *testhost.Stream, kind error) {
		t.Helper()
		res, err := s.Collect(wait, true)
		if err != nil {
			t.Fatal(err)
		}
		if res.Err == nil || !errors.Is(res.Err, kind) {
			t.Fatalf("stream %d: got %+v / %v, want %v", s.ID, res.Exit, res.Err, kind)
		}
	}
	s := h.Open(5)
	_ = s.SendRaw(protocol.Type(99), []byte("x"))
	expectErr(s, errdefs.ErrUnsupported)
	s = h.Open(6)
	_ = s.Send(protocol.THello, protocol.Hello{}) // a guest-to-host type
	expectErr(s, errdefs.ErrUnsupported)
	s = h.Open(7)
	_ = s.SendRaw(protocol.TExec, []byte{0xc1})
	expectErr(s, errdefs.ErrInvalidArgument)
	s = h.Open(8)
	_ = s.SendRaw(protocol.TExec, []byte{0x92, 0x01, 0x02}) // valid msgpack, wrong shape
	expectErr(s, errdefs.ErrInvalidArgument)
	_ = h.Send(protocol.TExec, 0, protocol.Exec{Argv: []string{"true"}})
	f, err := h.Stream0().Next(wait)
	if err != nil || f.Type != protocol.TError {
		t.Fatalf("exec on stream 0: %v %v", f.Type, err)
	}
	s = h.Open(9)
	_ = s.Send(protocol.TShutdown, nil)
	expectErr(s, errdefs.ErrInvalidArgument)

	// Duplicate stream id: the running exec's stream ends with an error.
	s = h.Open(10)
	_ = s.Send(protocol.TExec, protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv})
	if f, err := s.Next(wait); err != nil || f.Type != protocol.TStarted {
		t.Fatalf("%v %v", f.Type, err)
	}
	_ = s.Send(protocol.TExec, protocol.Exec{Argv: []string{"true"}, Env: testEnv})
	expectErr(s, errdefs.ErrAlreadyExists)
	// A bad body on a running stream ends it too.
	s = h.Open(11)
	_ = s.Send(protocol.TExec, protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv})
	if f, err := s.Next(wait); err != nil || f.Type != protocol.TStarted {
		t.Fatalf("%v %v", f.Type, err)
	}
	_ = s.SendRaw(protocol.TSignal, []byte{0xc1})
	expectErr(s, errdefs.ErrInvalidArgument)
	// Frames for unknown streams are ignored.
	_ = h.Send(protocol.TCredit, 12345, protocol.Credit{Fd: 1, Bytes: 10})
	_ = h.Send(protocol.TStdin, 12345, nil)
	_ = h.Send(protocol.TCancel, 12345, nil)
	wantExit(t, run(t, h, protocol.Exec{Argv: []string{"true"}}), 0)
}

func TestConcurrentExecs(t *testing.T) {
	h, _ := serve(t, Config{})
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			script := fmt.Sprintf(`i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "exec-%d-line-$i"; done; echo "err-%d" >&2; exit %d`, i, i, i)
			res, err := h.Run(sh(script), nil, wait)
			if err != nil {
				errs <- err
				return
			}
			var want bytes.Buffer
			for j := 1; j <= 3000; j++ {
				fmt.Fprintf(&want, "exec-%d-line-%d\n", i, j)
			}
			if res.Exit == nil || res.Exit.Code != i || !bytes.Equal(res.Stdout, want.Bytes()) || string(res.Stderr) != fmt.Sprintf("err-%d\n", i) {
				errs <- fmt.Errorf("exec %d: exit %+v err %v, stdout %d bytes (want %d), stderr %q", i, res.Exit, res.Err, len(res.Stdout), want.Len(), res.Stderr)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestExecLimit(t *testing.T) {
	h, _ := serve(t, Config{MaxExecs: 2})
	for i := 0; i < 2; i++ {
		s, _ := h.Exec(protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv})
		if f, err := s.Next(wait); err != nil || f.Type != protocol.TStarted {
			t.Fatalf("%v %v", f.Type, err)
		}
	}
	res := run(t, h, protocol.Exec{Argv: []string{"true"}})
	wantErr(t, res, errdefs.ErrLimit, "limit")
}

func TestShutdownKillsProcesses(t *testing.T) {
	h, done := serve(t, Config{})
	s, _ := h.Exec(protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv})
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("%v %v", f.Type, err)
	}
	var st protocol.Started
	_ = protocol.Decode(f, &st)
	if err := h.Send(protocol.TShutdown, 0, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("Serve returned %v", err)
		}
		done <- err // for the cleanup
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
	deadline := time.Now().Add(wait)
	for unix.Kill(st.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d survived shutdown", st.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUserSwitch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: run as root, as make test does")
	}
	if _, err := resolveUser("/", "nobody"); err != nil {
		t.Fatalf("no nobody user here: %v", err)
	}
	h, _ := serve(t, Config{})
	res := run(t, h, protocol.Exec{Argv: []string{"sh", "-c", "id -u; id -g; echo $HOME"}, User: "nobody"})
	wantExit(t, res, 0)
	who, _ := resolveUser("/", "nobody")
	want := fmt.Sprintf("%d\n%d\n%s\n", who.Uid, who.Gid, who.Home)
	if string(res.Stdout) != want {
		t.Fatalf("got %q want %q", res.Stdout, want)
	}
	res = run(t, h, protocol.Exec{Argv: []string{"sh", "-c", "id -u; id -g; id -G"}, User: "1234:5678"})
	wantExit(t, res, 0)
	if string(res.Stdout) != "1234\n5678\n5678\n" {
		t.Fatalf("got %q", res.Stdout)
	}
}

// TestBoxRootLookups serves a fake box root without chroot: PATH, cwd and
// users are resolved inside it, not in the agent's root.
func TestBoxRootLookups(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"bin", "etc", "work", "usr"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "hello-box"), []byte("#!/bin/sh\necho hello from the box in $(pwd)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An absolute symlink must resolve inside root.
	if err := os.Symlink("/bin", filepath.Join(root, "usr", "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\nboxer:x:4242:4243::/home/boxer:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := serve(t, Config{Root: root})
	res := run(t, h, protocol.Exec{Argv: []string{"hello-box"}, Env: []string{"PATH=/usr/bin"}, Cwd: "/work"})
	wantExit(t, res, 0)
	if string(res.Stdout) != "hello from the box in "+filepath.Join(root, "work")+"\n" {
		t.Fatalf("%q", res.Stdout)
	}
	// sh exists on the host but not in the box.
	res = run(t, h, protocol.Exec{Argv: []string{"sh"}, Env: []string{"PATH=/usr/bin:/bin"}})
	wantErr(t, res, errdefs.ErrNotFound, "executable file not found")
	res = run(t, h, protocol.Exec{Argv: []string{"hello-box"}, Env: []string{"PATH=/bin"}, User: "nobody"})
	wantErr(t, res, errdefs.ErrNotFound, `user "nobody"`)
}

// TestBackgroundOutlivesExec: an exec ends with its own process, even when a
// background process it started still holds its output pipes (no
// redirection); that process keeps running, is not blocked or killed by
// its output, and what the exec printed before it exited all arrives.
func TestBackgroundOutlivesExec(t *testing.T) {
	h, _ := serve(t, Config{})
	start := time.Now()
	res := run(t, h, sh("(while :; do echo bg >&2; sleep 0.01; done &); head -c 300000 /dev/zero | tr '\\0' x; echo; echo fg-done"))
	wantExit(t, res, 0)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the exec waited for its background process: %s", took)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, strings.Repeat("x", 300000)+"\nfg-done\n") {
		t.Fatalf("the exec's own output is incomplete (%d bytes)", len(out))
	}
	// The loop runs on (it writes to the orphaned pipe all the while).
	time.Sleep(300 * time.Millisecond)
	ps := run(t, h, protocol.Exec{Argv: []string{"sh", "-c", "ps -eo pid,args | grep '[w]hile :; do echo bg' | awk '{print $1}'"}})
	pids := strings.Fields(string(ps.Stdout))
	if len(pids) == 0 {
		t.Fatalf("the background loop did not survive its exec")
	}
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			unix.Kill(n, unix.SIGKILL)
		}
	}
}
