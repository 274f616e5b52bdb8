//go:build linux

package agent

import (
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

// term drives a TTY exec: it reads the stream's frames, credits output back
// and keeps what the terminal showed.
type term struct {
	t    *testing.T
	s    *testhost.Stream
	out  []byte
	seen int // out[:seen] was matched by expect already
	exit *protocol.Exit
	err  error
}

func startTerm(t *testing.T, h *testhost.Host, e protocol.Exec) *term {
	t.Helper()
	e.Tty = true
	if e.Env == nil {
		e.Env = testEnv
	}
	s, err := h.Exec(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Forget(s) })
	return &term{t: t, s: s}
}

// next handles one frame; false once the stream has ended.
func (tm *term) next(deadline time.Time) bool {
	tm.t.Helper()
	if tm.exit != nil || tm.err != nil {
		return false
	}
	f, err := tm.s.Next(time.Until(deadline))
	if err != nil {
		tm.t.Fatalf("%v; the terminal showed %q", err, tm.out)
	}
	switch f.Type {
	case protocol.TStdout:
		tm.out = append(tm.out, f.Payload...)
		if err := tm.s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)}); err != nil {
			tm.t.Fatal(err)
		}
	case protocol.TStderr:
		tm.t.Fatalf("stderr frame %q on a TTY exec", f.Payload)
	case protocol.TExit:
		var x protocol.Exit
		if err := protocol.Decode(f, &x); err != nil {
			tm.t.Fatal(err)
		}
		tm.exit = &x
	case protocol.TError:
		var pe protocol.Error
		if err := protocol.Decode(f, &pe); err != nil {
			tm.t.Fatal(err)
		}
		tm.err = pe.Err()
	}
	return tm.exit == nil && tm.err == nil
}

// expect waits until the output after the last match matches re and
// returns the match.
func (tm *term) expect(re string) string {
	tm.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(wait)
	for {
		if loc := rx.FindIndex(tm.out[tm.seen:]); loc != nil {
			m := string(tm.out[tm.seen+loc[0] : tm.seen+loc[1]])
			tm.seen += loc[1]
			return m
		}
		if !tm.next(deadline) {
			tm.t.Fatalf("stream ended (exit %+v, error %v) without %q; the terminal showed %q", tm.exit, tm.err, re, tm.out)
		}
	}
}

func (tm *term) typeIn(s string) {
	tm.t.Helper()
	if err := tm.s.SendRaw(protocol.TStdin, []byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// end reads the stream to its last frame.
func (tm *term) end() {
	tm.t.Helper()
	deadline := time.Now().Add(wait)
	for tm.next(deadline) {
	}
}

func TestHelloListsTTY(t *testing.T) {
	agentSide, hostSide := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(agentSide, Config{Root: "/", Hello: protocol.Hello{Version: protocol.Version}}) }()
	defer func() { hostSide.Close(); agentSide.Close(); <-done }()
	hello, err := testhost.New(hostSide).Hello(wait)
	if err != nil {
		t.Fatal(err)
	}
	if !hello.Has(protocol.FeatureTTY) || (protocol.Hello{}).Has(protocol.FeatureTTY) {
		t.Fatalf("features %q", hello.Features)
	}
}

func TestTTYStreamsAndSize(t *testing.T) {
	h, _ := serve(t, Config{})
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c",
		`tty; stty size; echo err >&2; echo "TERM=$TERM"; test -t 0 && test -t 1 && test -t 2 && echo all-tty; ps -o pid=,sid=,pgid=,tpgid= -p $$`},
		Rows: 30, Cols: 100})
	tm.end()
	if tm.err != nil || tm.exit == nil || tm.exit.Code != 0 {
		t.Fatalf("exit %+v error %v; output %q", tm.exit, tm.err, tm.out)
	}
	out := string(tm.out)
	for _, want := range []string{"/dev/pts/", "\r\n30 100\r\n", "\r\nerr\r\n", "TERM=xterm\r\n", "all-tty\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %q", want, out)
		}
	}
	// The shell leads its own session, and the terminal's foreground group is its group.
	if m := regexp.MustCompile(`(\d+) +(\d+) +(\d+) +(\d+)`).FindStringSubmatch(out); m == nil || m[1] != m[2] || m[1] != m[3] || m[1] != m[4] {
		t.Errorf("pid, sid, pgid, tpgid: %q", m)
	}
	// TERM from the request is kept.
	tm = startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c", `echo "TERM=$TERM"`}, Env: append([]string{"TERM=vt100"}, testEnv...)})
	tm.expect(`TERM=vt100\r\n`)
	tm.end()
}

// A person at the terminal: a line typed while echo is on, a resize, ^D.
func TestTTYInteractive(t *testing.T) {
	h, _ := serve(t, Config{})
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c", `printf 'name? '; read x; echo "got:$x"; stty size; read y; stty size; cat; echo cat-done`}, Stdin: true})
	tm.expect(`name\? $`)
	tm.typeIn("hello\n")
	tm.expect(`^hello\r\ngot:hello\r\n24 80\r\n`) // the terminal echoed the line
	if err := tm.s.Send(protocol.TResize, protocol.Resize{Rows: 40, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	tm.typeIn("\n")
	tm.expect(`^\r\n40 100\r\n`)
	tm.typeIn("abc\n")
	tm.expect(`abc\r\nabc\r\n`)
	if err := tm.s.Send(protocol.TStdinClose, nil); err != nil { // ^D: cat sees EOF
		t.Fatal(err)
	}
	tm.expect(`cat-done\r\n`)
	tm.end()
	if tm.exit == nil || tm.exit.Code != 0 {
		t.Fatalf("exit %+v error %v", tm.exit, tm.err)
	}
}

// ^C typed into the terminal interrupts its foreground group.
func TestTTYInterrupt(t *testing.T) {
	h, _ := serve(t, Config{})
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c", `echo ready; exec sleep 30`}, Stdin: true})
	tm.expect(`ready\r\n`)
	tm.typeIn("\x03")
	tm.end()
	if tm.exit == nil || tm.exit.Signal != 2 || tm.exit.Code != 130 {
		t.Fatalf("exit %+v error %v; output %q", tm.exit, tm.err, tm.out)
	}
}

// A timeout, or the host going away, kills the whole session, including a
// job-control shell's job in a process group of its own that ignores the
// hangup.
func TestTTYTimeoutKillsTheSession(t *testing.T) {
	h, _ := serve(t, Config{})
	for _, cancel := range []bool{false, true} {
		e := protocol.Exec{Argv: []string{"sh", "-c", `set -m; trap '' HUP; sh -c 'echo "job:$$ $(ps -o pgid= -p $$)"; exec sleep 30'`}, Stdin: true}
		if !cancel {
			e.TimeoutMs, e.GraceMs = 3000, 300 // long enough for the job to start on a loaded machine
		}
		tm := startTerm(t, h, e)
		m := regexp.MustCompile(`job:(\d+) +(\d+)`).FindStringSubmatch(tm.expect(`job:\d+ +\d+`))
		if m[1] != m[2] {
			t.Fatalf("the job is not in a group of its own: %q", m)
		}
		if cancel {
			tm.s.Send(protocol.TCancel, nil)
		} else {
			tm.end()
			if tm.exit == nil || !tm.exit.TimedOut {
				t.Fatalf("exit %+v error %v; output %q", tm.exit, tm.err, tm.out)
			}
		}
		pid, _ := strconv.Atoi(m[1])
		for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				unix.Kill(pid, unix.SIGKILL)
				t.Fatalf("cancel %v: the job outlived its session", cancel)
			}
		}
	}
}

func TestTTYBadSizes(t *testing.T) {
	h, _ := serve(t, Config{})
	res := run(t, h, protocol.Exec{Argv: []string{"true"}, Tty: true, Rows: 70000})
	wantErr(t, res, errdefs.ErrInvalidArgument, "rows and cols")
	res = run(t, h, protocol.Exec{Argv: []string{"true"}, Tty: true, Cols: -1})
	wantErr(t, res, errdefs.ErrInvalidArgument, "rows and cols")

	// A resize to 0 rows ends the stream; a resize of a non-TTY exec is ignored.
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sleep", "30"}})
	tm.s.Send(protocol.TResize, protocol.Resize{Rows: 0, Cols: 80})
	tm.end()
	if !errors.Is(tm.err, errdefs.ErrInvalidArgument) {
		t.Fatalf("resize to 0 rows: exit %+v error %v", tm.exit, tm.err)
	}
	s, err := h.Exec(protocol.Exec{Argv: []string{"sh", "-c", "sleep 0.2; echo done"}, Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(protocol.TResize, protocol.Resize{Rows: 10, Cols: 10})
	res, err = s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// TestTTYBackgroundOutlivesExec: on a terminal too, the exec ends with its
// shell and a nohup'd process keeps running. (The kernel sends SIGHUP to the
// terminal's foreground group when the shell, its session's leader, exits:
// as with docker exec -t, nohup must have ignored it by then, hence the
// sleep.)
func TestTTYBackgroundOutlivesExec(t *testing.T) {
	h, _ := serve(t, Config{})
	start := time.Now()
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c", "nohup sleep 3612 >/dev/null 2>&1 </dev/null & sleep 0.5; echo started"}})
	tm.expect(`started\r\n`)
	tm.end()
	if tm.err != nil || tm.exit == nil || tm.exit.Code != 0 {
		t.Fatalf("exit %+v error %v; output %q", tm.exit, tm.err, tm.out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the exec waited for its background process: %s", took)
	}
	ps := run(t, h, sh("ps -eo pid,args | grep '[s]leep 3612' | awk '{print $1}'"))
	pids := strings.Fields(string(ps.Stdout))
	if len(pids) == 0 {
		t.Fatal("the nohup'd sleep did not survive its terminal exec")
	}
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			unix.Kill(n, unix.SIGKILL)
		}
	}
}

// TestTTYBackgroundHoldingTheTerminal: a background process that keeps the
// terminal (not redirected) does not keep its exec running.
func TestTTYBackgroundHoldingTheTerminal(t *testing.T) {
	h, _ := serve(t, Config{})
	start := time.Now()
	tm := startTerm(t, h, protocol.Exec{Argv: []string{"sh", "-c", "nohup sleep 3613 & sleep 0.5; echo started"}})
	tm.expect(`started\r\n`)
	tm.end()
	if tm.err != nil || tm.exit == nil || tm.exit.Code != 0 {
		t.Fatalf("exit %+v error %v; output %q", tm.exit, tm.err, tm.out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the exec waited for its background process: %s", took)
	}
	ps := run(t, h, sh("ps -eo pid,args | grep '[s]leep 3613' | awk '{print $1}'"))
	pids := strings.Fields(string(ps.Stdout))
	if len(pids) == 0 {
		t.Fatal("the nohup'd sleep holding the terminal did not survive its exec")
	}
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			unix.Kill(n, unix.SIGKILL)
		}
	}
}
