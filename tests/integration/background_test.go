package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// alivePid reports whether pid runs in the box, and what it runs.
func alivePid(t *testing.T, b *boxlite.Box, pid int) (bool, string) {
	t.Helper()
	res := runIn(t, b, sh(fmt.Sprintf("kill -0 %d 2>/dev/null && cat /proc/%d/cmdline | tr '\\0' ' '", pid, pid)))
	return res.Code == 0, strings.TrimSpace(string(res.Stdout))
}

func pidOf(t *testing.T, res *boxlite.ExecResult) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil || pid <= 1 || res.Code != 0 {
		t.Fatalf("want a pid, got %q (code %d, stderr %q)", res.Stdout, res.Code, res.Stderr)
	}
	return pid
}

// TestBackgroundOutlivesExec: a process an exec starts in the background
// keeps running after the exec ends, as in docker exec and BoxLite
// (`nohup cmd &`, `(cmd &)`); the next exec finds it.
func TestBackgroundOutlivesExec(t *testing.T) {
	cases := []struct{ name, script, marker string }{
		{"nohup", "nohup sleep 3601 >/dev/null 2>&1 & echo $!", "sleep 3601"},
		{"plain &", "sleep 3602 >/dev/null 2>&1 & echo $!", "sleep 3602"},
		// (cmd &): the subshell exits at once, the sleep is reparented.
		{"subshell", "(sleep 3603 >/dev/null 2>&1 & echo $! >/tmp/bg.pid); cat /tmp/bg.pid", "sleep 3603"},
		// Not redirected: the sleep holds the exec's output pipes, and
		// still the exec ends with its shell.
		{"holding the output", "(sleep 3606 & echo $! >/tmp/bg2.pid); cat /tmp/bg2.pid", "sleep 3606"},
		{"nohup holding the output", "nohup sleep 3607 & echo $!", "sleep 3607"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			pid := pidOf(t, runIn(t, shared, sh(c.script)))
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("the exec waited for its background process: %s", took)
			}
			time.Sleep(500 * time.Millisecond) // whatever would end it has had its chance
			ok, cmdline := alivePid(t, shared, pid)
			if !ok || !strings.Contains(cmdline, c.marker) {
				t.Fatalf("background process %d (%s) did not outlive its exec: alive %v, cmdline %q", pid, c.marker, ok, cmdline)
			}
			runIn(t, shared, sh(fmt.Sprintf("kill %d", pid)))
		})
	}
}

// TestTimeoutEndsOnlyTheGroup: a timeout ends the exec's process group, but
// not what the exec started in a session of its own before it.
func TestTimeoutEndsOnlyTheGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := shared.Run(ctx, boxlite.Command{
		Argv:    []string{"sh", "-c", "setsid sleep 3604 >/dev/null 2>&1 & echo $!; sleep 3605 >/dev/null 2>&1 & echo $!; sleep 60"},
		Timeout: 2 * time.Second, Grace: 500 * time.Millisecond,
	})
	if err == nil || !res.TimedOut {
		t.Fatalf("want a timeout, got %v (%+v)", err, res)
	}
	pids := strings.Fields(string(res.Stdout))
	if len(pids) != 2 {
		t.Fatalf("want two pids, got %q", res.Stdout)
	}
	own, _ := strconv.Atoi(pids[0])
	grouped, _ := strconv.Atoi(pids[1])
	if ok, _ := alivePid(t, shared, own); !ok {
		t.Errorf("the setsid process %d was killed with the timed-out exec's group", own)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, cmdline := alivePid(t, shared, grouped)
		if !ok || !strings.Contains(cmdline, "sleep 3605") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d of the timed-out exec's group survived the timeout", grouped)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	runIn(t, shared, sh(fmt.Sprintf("kill %d 2>/dev/null; true", own)))
}

// TestBackgroundServerAnswersNextExec: an agent's usual pattern. One exec
// starts an HTTP server with nohup and returns; the next exec talks to it.
func TestBackgroundServerAnswersNextExec(t *testing.T) {
	if os.Getenv("BOXLITE_TEST_PYTHON_IMAGE") == "" {
		t.Fatal("BOXLITE_TEST_PYTHON_IMAGE is not set: `make test` builds the python:slim test image and sets it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")); err != nil {
		t.Fatal(err)
	}
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim", boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// Its log is not redirected: it goes to the first exec's output pipe,
	// which outlives that exec without a reader on the host (requests are
	// logged to it below; the server must not block or die on them).
	start := runIn(t, b, sh("mkdir -p /srv && echo hello-from-bg > /srv/index.html && cd /srv && "+
		"nohup python3 -m http.server 8123 --bind 127.0.0.1 & echo $!"))
	pid := pidOf(t, start)
	fetch := `import sys, time, urllib.request
for i in range(300):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8123/index.html", timeout=5).read().decode().strip()); sys.exit(0)
    except OSError as e:
        err = e; time.sleep(0.2)
print("no answer:", err); sys.exit(1)`
	for i := range 3 {
		res := runIn(t, b, boxlite.Command{Argv: []string{"python3", "-c", fetch}, Timeout: 2 * time.Minute})
		if res.Code != 0 || strings.TrimSpace(string(res.Stdout)) != "hello-from-bg" {
			t.Fatalf("request %d: the server started by an earlier exec did not answer: code %d, %q %q", i, res.Code, res.Stdout, res.Stderr)
		}
	}
	if ok, _ := alivePid(t, b, pid); !ok {
		t.Errorf("server %d gone after answering", pid)
	}
}
