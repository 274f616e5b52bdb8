package e2b

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/tests/internal/pinned"
)

// jsSDKVersion is the e2b release on npm the JS test drives (`npm view e2b
// version`; npm's numbers are not PyPI's).
const jsSDKVersion = "2.51.0"

// nodeProject is a node project with E2B's JS SDK from npm, pinned, made on
// first use under build/.
func nodeProject(t *testing.T) string {
	return pinned.NodeProject(t, repo, "e2b-"+jsSDKVersion, "e2b", jsSDKVersion)
}

// runNode runs the script file (of this directory) with node in the
// project dir, beside its node_modules so its imports resolve, with the
// SDK's variables and env; it must print ALL OK.
func runNode(t *testing.T, dir, file string, env ...string) {
	t.Helper()
	script := filepath.Join(dir, file)
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("%s against boxlite serve: %v", file, err)
	}
}

// TestE2BExamplesJS runs E2B's documented examples with E2B's JS SDK.
func TestE2BExamplesJS(t *testing.T) { runNode(t, nodeProject(t), "e2b_examples.mjs") }
