package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// screen collects what a TTY execution shows, for a test that reads it as
// a person would: wait for some text, then type.
type screen struct {
	t    *testing.T
	e    *boxlite.Execution
	mu   sync.Mutex
	cond *sync.Cond
	out  []byte
	seen int // out[:seen] was matched already
	end  error
}

func openScreen(t *testing.T, cmd boxlite.Command) *screen {
	t.Helper()
	cmd.Tty, cmd.Stdin = true, true
	e, err := shared.Exec(context.Background(), cmd)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd.Argv, err)
	}
	t.Cleanup(func() { e.Close() })
	s := &screen{t: t, e: e}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := e.Stdout.Read(buf)
			s.mu.Lock()
			s.out = append(s.out, buf[:n]...)
			s.dropQueries()
			if err != nil {
				s.end = err
			}
			s.mu.Unlock()
			s.cond.Broadcast()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// dropQueries drops the cursor position queries (ESC [ 6 n) busybox's line
// editor sends after its prompt: a terminal does not show them. They are
// left unanswered, as a terminal without the feature does: busybox 1.35
// drops keys that reach it in the same read as the answer, which a person
// never types that fast but a test does.
func (s *screen) dropQueries() {
	const dsr = "\x1b[6n"
	for {
		i := strings.Index(string(s.out[s.seen:]), dsr)
		if i < 0 {
			return
		}
		i += s.seen
		s.out = append(s.out[:i], s.out[i+len(dsr):]...)
	}
}

// expect waits (at most 30 s) until the output after the last match
// matches re, and returns the submatches.
func (s *screen) expect(re string) []string {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	timer := time.AfterFunc(30*time.Second, func() {
		s.mu.Lock()
		if s.end == nil {
			s.end = errdefs.Errorf(errdefs.ErrTimeout, "no match within 30s")
		}
		s.mu.Unlock()
		s.cond.Broadcast()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if m := rx.FindSubmatchIndex(s.out[s.seen:]); m != nil {
			var subs []string
			for i := 0; i < len(m); i += 2 {
				if m[i] >= 0 {
					subs = append(subs, string(s.out[s.seen+m[i]:s.seen+m[i+1]]))
				} else {
					subs = append(subs, "")
				}
			}
			s.seen += m[1]
			return subs
		}
		if s.end != nil {
			s.t.Fatalf("waiting for %q: %v; the terminal showed %q", re, s.end, s.out)
		}
		s.cond.Wait()
	}
}

func (s *screen) typeIn(keys string) {
	s.t.Helper()
	if _, err := io.WriteString(s.e.Stdin, keys); err != nil {
		s.t.Fatalf("type %q: %v", keys, err)
	}
}

func (s *screen) wait() boxlite.ExitStatus {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s.e.Wait(ctx)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.t.Fatalf("wait: %v; the terminal showed %q", err, s.out)
	}
	return st
}

// An interactive shell on a terminal, driven as a person would.
func TestTTYShell(t *testing.T) {
	s := openScreen(t, boxlite.Command{Argv: []string{"sh"}})
	const prompt = `# $` // busybox ash as root: "/ # "
	s.expect(prompt)
	s.typeIn(`read x; echo "got:$x"` + "\r")
	s.expect(`read x; echo "got:\$x"\r\n`) // the shell echoed what was typed
	s.typeIn("hello\r")
	// The kernel echoes "hello" if read(1) had the terminal back in
	// canonical mode when it arrived, not while the shell's editor still had it.
	s.expect(`^(hello\r\n)?got:hello\r\n`)
	s.expect(prompt)
	s.typeIn("tty\r")
	s.expect(`\r\n/dev/pts/\d+\r\n`)
	s.expect(prompt)
	s.typeIn("stty size\r")
	s.expect(`\r\n24 80\r\n`)
	s.expect(prompt)
	if err := s.e.Resize(40, 100); err != nil {
		t.Fatal(err)
	}
	s.typeIn("stty size\r")
	s.expect(`\r\n40 100\r\n`)
	s.expect(prompt)
	// ^D at the prompt: the shell sees the end of its input and exits.
	if err := s.e.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.wait(); st.Code != 0 || st.Signal != 0 {
		t.Fatalf("shell exit %+v; the terminal showed %q", st, s.out)
	}
	// A finished execution cannot be resized.
	if err := s.e.Resize(10, 10); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("resize after exit: %v", err)
	}
}

// A program reading a line from its terminal with echo on, its stderr on
// the same terminal, the size it was started with, ^C, and the errors.
func TestTTYReadLine(t *testing.T) {
	s := openScreen(t, boxlite.Command{Argv: []string{"sh", "-c",
		`stty -a | grep -o ' echo ' >&2; printf 'name? '; read name; echo "hello, $name" >&2; stty size; echo "TERM=$TERM"; exec sleep 60`},
		Rows: 33, Cols: 111})
	s.expect(`^ echo \r\nname\? $`)
	s.typeIn("world\n")
	s.expect(`^world\r\nhello, world\r\n33 111\r\nTERM=xterm\r\n$`) // the terminal echoed the line
	s.typeIn("\x03")                                                // ^C: SIGINT to the foreground group
	if st := s.wait(); st.Signal != 2 || st.Code != 130 {
		t.Fatalf("after ^C: %+v", st)
	}
	if n, err := s.e.Stderr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("stderr of a TTY exec: %d, %v", n, err)
	}

	e, err := shared.Exec(context.Background(), sh("sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Resize(24, 80); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Errorf("resize without a terminal: %v", err)
	}
	for _, size := range [][2]int{{0, 80}, {24, 0}, {65536, 80}, {-1, 80}} {
		if err := s.e.Resize(size[0], size[1]); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("resize to %v: %v", size, err)
		}
		if size[0] == 0 || size[1] == 0 {
			continue // 0 means the default there
		}
		if _, err := shared.Exec(context.Background(), boxlite.Command{Argv: []string{"true"}, Tty: true, Rows: size[0], Cols: size[1]}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("exec with size %v: %v", size, err)
		}
	}
	// A user gets a terminal it owns, in the box's own devpts.
	res := runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", `ls -ln "$(tty)"; id -u`}, User: "box", Tty: true})
	if !regexp.MustCompile(`^crw--w---- +1 1000 +5 .* /dev/pts/\d+\r\n1000\r\n$`).Match(res.Stdout) || res.Code != 0 {
		t.Errorf("terminal of user box: %q, exit %d", res.Stdout, res.Code)
	}
	// Run collects a terminal's output like any other.
	res = runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2"}, Tty: true})
	if string(res.Stdout) != "out\r\nerr\r\n" || len(res.Stderr) != 0 || res.Code != 0 {
		t.Fatalf("run on a terminal: %+v", res)
	}
}

// `boxlite run -it` in a real terminal (tmux), as a person uses it: type a
// command, read the screen, resize the window, type exit.
func TestCLIInteractiveTTY(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is not installed (make setup installs it): %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	codeFile := filepath.Join(dir, "code")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(tmux, append([]string{"-S", sock}, args...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cli := filepath.Join(repo, "build", "boxlite")
	script := fmt.Sprintf("%s run --rm -it alpine:latest -- sh; echo $? > %s", cli, codeFile)
	if out, err := run("new-session", "-d", "-s", "bx", "-x", "100", "-y", "30", "sh", "-c", script); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	defer run("kill-server") // our own server, on our own socket
	// waitScreen polls the pane until it shows re (the box boots first).
	waitScreen := func(re string, within time.Duration) string {
		t.Helper()
		rx := regexp.MustCompile(re)
		var screen string
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			out, err := run("capture-pane", "-p", "-t", "bx")
			if err != nil {
				t.Fatalf("capture-pane: %v: %s (exit code file: %s)", err, out, readFile(codeFile))
			}
			if screen = out; rx.MatchString(screen) {
				return screen
			}
		}
		t.Fatalf("the screen never showed %q:\n%s", re, screen)
		return ""
	}
	waitScreen(`(?m)^/ #\s*$`, 90*time.Second)
	run("send-keys", "-t", "bx", "echo hi", "Enter")
	waitScreen(`(?m)^hi$`, 30*time.Second)
	// The window's size, and a change of it, reach the box's terminal.
	run("send-keys", "-t", "bx", "clear; stty size", "Enter")
	waitScreen(`(?m)^30 100$`, 30*time.Second)
	if out, err := run("resize-window", "-t", "bx", "-x", "120", "-y", "40"); err != nil {
		t.Fatalf("resize-window: %v: %s", err, out)
	}
	run("send-keys", "-t", "bx", "clear; stty size", "Enter")
	waitScreen(`(?m)^40 120$`, 30*time.Second)
	run("send-keys", "-t", "bx", "exit", "Enter")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := run("has-session", "-t", "bx"); err != nil {
			break // the session ended with its program
		}
		if time.Now().After(deadline) {
			screen, _ := run("capture-pane", "-p", "-t", "bx")
			t.Fatalf("the session did not end after exit:\n%s", screen)
		}
	}
	if code := strings.TrimSpace(readFile(codeFile)); code != "0" {
		t.Fatalf("boxlite run exited %q", code)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
