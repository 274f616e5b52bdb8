// Package e2b tests E2B's API on `boxlite serve`: the real binary on
// loopback over a home of its own, driven by E2B's own Python SDK from PyPI
// (pinned, in a virtualenv under build/) running E2B's documented examples
// unchanged, and by hostile raw requests.
package e2b

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/tests/internal/pinned"
)

// sdkVersion is the e2b release the tests drive (`pip index versions e2b`).
const sdkVersion = "2.63.0"

var (
	repo, home, key, url string
	srv                  *exec.Cmd
	srvLog               = &bytes.Buffer{}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("BOXLITE_TEST_IMAGE") == "" || os.Getenv("BOXLITE_ASSETS") == "" {
		fmt.Println("FAIL: the E2B tests need BOXLITE_TEST_IMAGE and BOXLITE_ASSETS; run them with `make test-go`")
		return 1
	}
	wd, _ := os.Getwd()
	repo = filepath.Join(wd, "..", "..")
	var err error
	if home, err = os.MkdirTemp("", "bxe2b"); err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(home)
	keys := filepath.Join(home, "serve", "keys")
	if _, err := boxlite("image", "load", os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		fmt.Println("load the test image:", err)
		return 1
	}
	out, err := boxlite("serve", "key", "create", "--keys", keys, "--name", "e2b-tests")
	if err != nil {
		fmt.Println("create a key:", err)
		return 1
	}
	key = strings.TrimSpace(out)
	done, err := start(keys)
	if err != nil {
		fmt.Println("start the server:", err)
		return 1
	}
	code := m.Run()
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		srv.Process.Kill()
		<-done
	}
	// What the tests left behind goes with the home.
	if out, err := boxlite("ls", "-aq"); err == nil {
		for _, id := range strings.Fields(out) {
			boxlite("rm", "-f", id)
		}
	}
	if code != 0 {
		fmt.Printf("server log:\n%s\n", srvLog.String())
	}
	return code
}

func boxlite(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "build", "boxlite"), args...)
	cmd.Env = append(os.Environ(), "BOXLITE_HOME="+home)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("boxlite %q: %v: %s", args, err, errOut.String())
	}
	return out.String(), nil
}

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

func start(keys string) (chan struct{}, error) {
	srv = exec.Command(filepath.Join(repo, "build", "boxlite"), "serve", "--listen", "127.0.0.1:0", "--keys", keys, "--access-log", "")
	srv.Env = append(os.Environ(), "BOXLITE_HOME="+home)
	stderr, err := srv.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	urlc, done := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
			srvLog.WriteString(sc.Text() + "\n")
		}
		srv.Wait()
		close(done)
	}()
	select {
	case url = <-urlc:
		return done, nil
	case <-done:
		return nil, fmt.Errorf("boxlite serve ended: %s", srvLog.String())
	case <-time.After(time.Minute):
		srv.Process.Kill()
		return nil, fmt.Errorf("boxlite serve did not listen within a minute")
	}
}

// venv is a virtualenv with E2B's SDK from PyPI, pinned, made on first use.
func venv(t *testing.T) string { return pinned.Venv(t, repo, "e2b", "e2b", sdkVersion) }

// sdkEnv points E2B's SDK at the server.
func sdkEnv() []string {
	return append(os.Environ(), "E2B_API_URL="+url+"/e2b", "E2B_SANDBOX_URL="+url+"/e2b", "E2B_API_KEY="+key)
}

// TestE2BExamples runs E2B's documented examples with E2B's Python SDK.
func TestE2BExamples(t *testing.T) {
	py := venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, py, "e2b_examples.py")
	cmd.Env = sdkEnv()
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("E2B's examples against boxlite serve: %v", err)
	}
}
