package e2b

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jsSDKVersion is the e2b release on npm the JS test drives (`npm view e2b
// version`; npm's numbers are not PyPI's).
const jsSDKVersion = "2.51.0"

// nodeProject is a node project with E2B's JS SDK from npm, pinned, made on
// first use under build/.
func nodeProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "nodeprojects", "e2b-"+jsSDKVersion)
	check := exec.Command("node", "-e", "console.log(require('e2b/package.json').version)")
	check.Dir = dir
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == jsSDKVersion {
		return dir
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"boxlite-e2b-test","private":true,"type":"module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--save-exact", "e2b@"+jsSDKVersion)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install e2b@%s: %v\n%s", jsSDKVersion, err, out)
	}
	return dir
}

// TestE2BExamplesJS runs E2B's documented examples with E2B's JS SDK.
func TestE2BExamplesJS(t *testing.T) {
	dir := nodeProject(t)
	script := filepath.Join(dir, "e2b_examples.mjs") // beside its node_modules, so the import resolves
	src, err := os.ReadFile("e2b_examples.mjs")
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
	cmd.Env = sdkEnv()
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("E2B's JS examples against boxlite serve: %v", err)
	}
}
