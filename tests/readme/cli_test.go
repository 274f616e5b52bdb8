package readme

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/cmdrun"
	"github.com/boxlite/boxlite/tests/internal/readme"
)

// A line's comment that says how it exits ("# exits 3"); else it exits 0.
var exitsRe = regexp.MustCompile(`#.*\bexits (\d+)\b`)

// lines are a block's lines, blank ones left out, with their line numbers.
func lines(b readme.Block) (out []string, at []int) {
	for i, l := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			out, at = append(out, l), append(at, b.Line+1+i)
		}
	}
	return out, at
}

// TestCLIBlocks runs the blocks marked `cli`, in order, each line with sh as
// a user types it: in a directory of the test's own holding the checkout's
// build/ (so build/boxlite is the CLI, also on PATH as boxlite) and a folder
// src/ to copy, a home of its own, stdin `exit` (the interactive shell's
// input) and docker.io mirrored on loopback. Each line must exit 0, or as its
// comment says ("exits 3").
func TestCLIBlocks(t *testing.T) {
	images(t)
	dir := t.TempDir()
	must(t, os.Symlink(filepath.Join(readme.Root(), "build"), filepath.Join(dir, "build")))
	must(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "src", "hello.txt"), []byte("hello\n"), 0o644))
	env := userEnv(t, filepath.Join(dir, "home"))
	c := cmdrun.Cmd{Env: env, Dir: dir, Stdin: "exit\n"}
	t.Cleanup(func() { // no box left running whatever failed
		c.Run(t, "sh", "-c", "build/boxlite ls -aq | xargs -r build/boxlite rm -f")
	})
	start := time.Now()
	for _, b := range blocks(t)(readme.Named("cli")) {
		ls, at := lines(b)
		for i, l := range ls {
			want := 0
			if m := exitsRe.FindStringSubmatch(l); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
			where := fmt.Sprintf("README.md:%d", at[i])
			if _, code := runLogged(t, c, where+": "+l, "sh", "-c", l); code != want {
				t.Fatalf("%s: %s\nexited %d, want %d", where, l, code, want)
			}
		}
	}
	t.Logf("the CLI blocks took %v", time.Since(start).Round(time.Millisecond))
}

// TestServeBlock runs the block marked `cli-serve` as TestCLIBlocks runs
// lines, but its last line, a server: it must answer /healthz on its default
// address, then stop on SIGTERM.
func TestServeBlock(t *testing.T) {
	images(t)
	for _, b := range blocks(t)(readme.Named("cli-serve")) {
		ls, at := lines(b)
		env := userEnv(t, filepath.Join(t.TempDir(), "home"))
		for i, l := range ls[:len(ls)-1] {
			if _, code := runLogged(t, cmdrun.Cmd{Env: env}, fmt.Sprintf("README.md:%d: %s", at[i], l), "sh", "-c", l); code != 0 {
				t.Fatalf("README.md:%d: %s: exit %d", at[i], l, code)
			}
		}
		server := ls[len(ls)-1]
		cmd := exec.Command("sh", "-c", "exec "+server)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stderr, err := cmd.StderrPipe()
		must(t, err)
		must(t, cmd.Start())
		done := make(chan error, 1)
		lines := make(chan string, 64)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				default:
				}
			}
			close(lines)
			done <- cmd.Wait()
		}()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Errorf("README.md:%d: %s did not stop within 15 s of SIGTERM", at[len(ls)-1], server)
			}
		}
		listening := false
		timeout := time.After(30 * time.Second)
		for !listening {
			select {
			case l, ok := <-lines:
				if !ok {
					stop()
					t.Fatalf("README.md:%d: %s exited before listening", at[len(ls)-1], server)
				}
				t.Log("serve: " + l)
				listening = strings.Contains(l, "listening on")
			case <-timeout:
				stop()
				t.Fatalf("README.md:%d: %s: not listening after 30 s", at[len(ls)-1], server)
			}
		}
		client := &http.Client{Timeout: 10 * time.Second}
		resp, err := client.Get("http://127.0.0.1:8100/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		stop()
		if err != nil {
			t.Fatalf("README.md:%d: %s: /healthz: %v", at[len(ls)-1], server, err)
		}
	}
}

// TestMakeBlocks checks the blocks marked `make-dry-run`, make's targets:
// each line's make command, as `make -n` (what it would do: its targets
// exist and their prerequisites resolve). Running them is the suites' own
// business (make test running itself would recurse).
func TestMakeBlocks(t *testing.T) {
	for _, b := range blocks(t)(readme.Named("make-dry-run")) {
		ls, at := lines(b)
		for i, l := range ls {
			cmdline := strings.TrimSpace(strings.SplitN(l, "#", 2)[0])
			f := strings.Fields(cmdline)
			if len(f) < 2 || f[0] != "make" {
				t.Fatalf("README.md:%d: %q is not a make command", at[i], l)
			}
			c := cmdrun.Cmd{Dir: readme.Root(), Timeout: time.Minute}
			if out, stderr, code := c.Run(t, "make", append([]string{"-n"}, f[1:]...)...); code != 0 {
				t.Errorf("README.md:%d: make -n %s: exit %d\n%s%s", at[i], strings.Join(f[1:], " "), code, out, stderr)
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
