package e2b

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	otherKeyOnce sync.Once
	otherKey     string
)

// secondKey is another key of the server's (made once): what it may see
// of the first key's snapshots is nothing.
func secondKey(t *testing.T) string {
	otherKeyOnce.Do(func() {
		out, err := boxlite("serve", "key", "create", "--keys", filepath.Join(home, "serve", "keys"), "--name", "e2b-other")
		if err != nil {
			t.Fatalf("create a second key: %v", err)
		}
		otherKey = strings.TrimSpace(out)
	})
	if otherKey == "" {
		t.Fatal("no second key")
	}
	return otherKey
}

// runPy runs a script of this directory with E2B's Python SDK, the SDK's
// variables and env; it must print ALL OK. Its output is returned.
func runPy(t *testing.T, env []string, script string, args ...string) string {
	t.Helper()
	py := venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	cmd.Env = append(sdkEnv(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("%s %q against boxlite serve: %v", script, args, err)
	}
	return string(out)
}

// TestSnapshots runs E2B's snapshot examples with E2B's Python SDK: a
// snapshot of a sandbox with a file and a process holding state, two
// sandboxes from it after the source is killed, each at the snapshot's
// instant and each its own; a filesystem snapshot; a pause keeping the
// process; list, delete, another key, bad ids.
func TestSnapshots(t *testing.T) {
	runPy(t, []string{"OTHER_API_KEY=" + secondKey(t)}, "snapshot_examples.py")
}

// TestSnapshotsJS runs E2B's snapshot examples with E2B's JS SDK: a named
// snapshot taken twice (one id, the latest build), a sandbox from it by
// name with the process's memory of the instant, list, delete, another
// key, a bad id.
func TestSnapshotsJS(t *testing.T) {
	runNode(t, nodeProject(t), "snapshot_examples.mjs", "OTHER_API_KEY="+secondKey(t), "E2B_KEY_NAME=e2b-tests")
}

// TestRestartAdoptsProcesses restarts the server (on the same address)
// between two runs of E2B's Python SDK: the sandbox's background process
// runs on and is the next server's, listed and counting on.
func TestRestartAdoptsProcesses(t *testing.T) {
	out := runPy(t, nil, "restart_examples.py", "before")
	i := strings.Index(out, "SANDBOX ")
	if i < 0 {
		t.Fatalf("no SANDBOX line: %s", out)
	}
	f := strings.Fields(out[i+len("SANDBOX "):])
	if len(f) < 3 {
		t.Fatalf("no SANDBOX line: %s", out)
	}
	stop()
	if err := start(filepath.Join(home, "serve", "keys"), strings.TrimPrefix(url, "http://")); err != nil {
		t.Fatalf("restart the server: %v", err)
	}
	runPy(t, nil, "restart_examples.py", "after", f[0], f[1], f[2])
}
