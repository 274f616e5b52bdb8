package rest

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

// upstreamBoxLite is the BoxLite release whose client the tests drive.
const upstreamBoxLite = "0.10.8"

// TestBoxLiteClient drives the server with BoxLite's own client:
// Boxlite.rest(BoxliteRestOptions.from_env()), SimpleBox, exec with
// streamed output, stdin, copies in and out, list, get, stop, remove.
func TestBoxLiteClient(t *testing.T) {
	runBoxLitePy(t, "boxlite_client.py")
}

// TestBoxLiteTunnel drives the server's tunnels with BoxLite's own
// client: box.network.tunnel(port), connect() and forward() through the
// descriptor's CONNECT, revoke_tunnel, a forged token refused.
func TestBoxLiteTunnel(t *testing.T) {
	runBoxLitePy(t, "boxlite_tunnel.py")
}

// runBoxLitePy runs a script of this directory with BoxLite's Python
// package against the server; it must print ALL OK.
func runBoxLitePy(t *testing.T, script string) {
	py := pinned.Venv(t, repo, "boxlite-"+upstreamBoxLite, "boxlite", upstreamBoxLite)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(repo, "tests", "rest", script))
	cmd.Env = append(os.Environ(), "BOXLITE_REST_URL="+srv.url, "BOXLITE_API_KEY="+key, "WORK="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("%s (BoxLite's client) against boxlite serve: %v", script, err)
	}
}

// upstreamNodeClient is the BoxLite Node package whose REST client the
// tests drive (its latest release on npm).
const upstreamNodeClient = "0.10.0"

// TestBoxLiteNodeClient drives the server with BoxLite's own Node package:
// JsBoxlite.rest(), SimpleBox exec with streamed output, copies in and out
// (the archive of one file that 0.10.0 sends without source_is_dir), list,
// get, stop, remove.
func TestBoxLiteNodeClient(t *testing.T) {
	dir := pinned.NodeProject(t, repo, "boxlite-"+upstreamNodeClient, "@boxlite-ai/boxlite", upstreamNodeClient)
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
