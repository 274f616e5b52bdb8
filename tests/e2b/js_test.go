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
func nodeProject(t *testing.T) string { return npmProject(t, "e2b", jsSDKVersion) }

// npmProject is a node project under build/nodeprojects with pkg@version
// from npm, pinned (and the pins in also), made on first use.
func npmProject(t *testing.T, pkg, version string, also ...string) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "nodeprojects", strings.NewReplacer("@", "", "/", "-").Replace(pkg)+"-"+version)
	check := exec.Command("node", "-e", "console.log(require(process.argv[1] + '/package.json').version)", pkg)
	check.Dir = dir
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == version {
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
	cmd := exec.CommandContext(ctx, "npm", append([]string{"install", "--no-audit", "--no-fund", "--save-exact", pkg + "@" + version}, also...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	return dir
}

// runNode runs the script file (of this directory) with node in the
// project dir, beside its node_modules so its imports resolve; it must
// print ALL OK.
func runNode(t *testing.T, dir, file string) {
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
	cmd.Env = sdkEnv()
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("%s against boxlite serve: %v", file, err)
	}
}

// TestE2BExamplesJS runs E2B's documented examples with E2B's JS SDK.
func TestE2BExamplesJS(t *testing.T) { runNode(t, nodeProject(t), "e2b_examples.mjs") }
