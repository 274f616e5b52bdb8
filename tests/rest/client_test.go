package rest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// upstreamBoxLite is the BoxLite release whose client the tests drive.
const upstreamBoxLite = "0.10.8"

// upstreamVenv is a virtualenv with BoxLite's own Python package from
// PyPI, pinned, made on first use under build/ (the registry is the one
// thing it needs from outside).
func upstreamVenv(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "venvs", "boxlite-"+upstreamBoxLite)
	py := filepath.Join(dir, "bin", "python")
	check := exec.Command(py, "-c", "import boxlite, importlib.metadata as m; print(m.version('boxlite'))")
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == upstreamBoxLite {
		return py
	}
	os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"python3", "-m", "venv", dir},
		{filepath.Join(dir, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", "boxlite==" + upstreamBoxLite},
	} {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	return py
}

// TestBoxLiteClient drives the server with BoxLite's own client:
// Boxlite.rest(BoxliteRestOptions.from_env()), SimpleBox, exec with
// streamed output, stdin, copies in and out, list, get, stop, remove.
func TestBoxLiteClient(t *testing.T) {
	py := upstreamVenv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(repo, "tests", "rest", "boxlite_client.py"))
	cmd.Env = append(os.Environ(), "BOXLITE_REST_URL="+srv.url, "BOXLITE_API_KEY="+key, "WORK="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("BoxLite's client against boxlite serve: %v", err)
	}
}

// upstreamNodeClient is the BoxLite Node package whose REST client the
// tests drive (its latest release on npm).
const upstreamNodeClient = "0.10.0"

// upstreamNodeProject is a node project with @boxlite-ai/boxlite from npm,
// pinned, made on first use under build/.
func upstreamNodeProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "nodeprojects", "boxlite-"+upstreamNodeClient)
	check := exec.Command("node", "-e", "console.log(require('@boxlite-ai/boxlite/package.json').version)")
	check.Dir = dir
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == upstreamNodeClient {
		return dir
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"boxlite-rest-client-test","private":true,"type":"module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--save-exact", "@boxlite-ai/boxlite@"+upstreamNodeClient)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install @boxlite-ai/boxlite@%s: %v\n%s", upstreamNodeClient, err, out)
	}
	return dir
}

// TestBoxLiteNodeClient drives the server with BoxLite's own Node package:
// JsBoxlite.rest(), SimpleBox exec with streamed output, copies in and out
// (the archive of one file that 0.10.0 sends without source_is_dir), list,
// get, stop, remove.
func TestBoxLiteNodeClient(t *testing.T) {
	dir := upstreamNodeProject(t)
	script := filepath.Join(dir, "boxlite_client.mjs") // beside its node_modules, so the import resolves
	src, err := os.ReadFile(filepath.Join(repo, "tests", "rest", "boxlite_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "BOXLITE_REST_URL="+srv.url, "BOXLITE_API_KEY="+key, "WORK="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("BoxLite's Node client against boxlite serve: %v", err)
	}
}
