package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// crictl runs crictl against the test's containerd (CRI, as the kubelet
// drives it).
func crictl(ctx context.Context, args ...string) (result, error) {
	bin := filepath.Join(os.Getenv("BOXLITE_ASSETS"), "crictl")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("crictl"); err != nil {
			return result{}, fmt.Errorf("crictl is neither in BOXLITE_ASSETS nor on PATH (`make build` builds it)")
		}
	}
	ep := "unix://" + env.sock
	return client(ctx, bin, append([]string{"--runtime-endpoint", ep, "--image-endpoint", ep, "--timeout", "300s"}, args...)...)
}

// pauseImage builds the pod sandboxes' image (a busybox sleep standing in
// for the pause binary) and imports it into CRI's namespace with the test
// image.
func pauseImage(t *testing.T, ctx context.Context) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if err := boxtest.BusyboxRoot(root); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "pause.tar")
	mk := exec.CommandContext(ctx, "go", "run", "./tests/images/mkimage", "-name", "pause:boxlite-test", "-rootfs", root,
		"-entrypoint", `["/bin/busybox","sleep","2147483647"]`, "-o", tar)
	mk.Dir, _ = filepath.Abs("../..")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("build the pause image: %v\n%s", err, out)
	}
	for _, img := range []string{tar, os.Getenv("BOXLITE_TEST_IMAGE")} {
		if _, err := client(ctx, "ctr", "--address", env.sock, "--namespace", "k8s.io", "images", "import", img); err != nil {
			t.Fatal(err)
		}
	}
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCRIPod runs a pod through CRI: two containers in one box (one boot
// id, not the host's), each in its own root, sharing an emptyDir; exec,
// logs, stop; containerd restarted under the running pod; rmp, after which
// nothing is left.
func TestCRIPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pauseImage(t, ctx)
	dir := t.TempDir()
	shared := filepath.Join(dir, "emptydir")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	podCfg := writeJSON(t, filepath.Join(dir, "pod.json"), map[string]any{
		"metadata":      map[string]any{"name": "p1", "namespace": "default", "uid": "uid-p1", "attempt": 0},
		"hostname":      "p1",
		"log_directory": filepath.Join(dir, "logs"),
		"linux":         map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	})
	start := time.Now()
	r, err := crictl(ctx, "runp", "--runtime", "boxlite", podCfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.TrimSpace(r.stdout)
	t.Logf("runp: %.1f s", time.Since(start).Seconds())
	defer crictl(context.Background(), "rmp", "-f", pod) //nolint:errcheck

	ids := map[string]string{}
	for _, name := range []string{"c1", "c2"} {
		cfg := writeJSON(t, filepath.Join(dir, name+".json"), map[string]any{
			"metadata": map[string]any{"name": name},
			"image":    map[string]any{"image": "docker.io/library/alpine:latest"},
			"command": []string{"sh", "-c", "cat /proc/sys/kernel/random/boot_id > /shared/" + name + ".boot; echo " + name +
				" > /shared/from-" + name + "; echo " + name + "-log; exec sleep 1000"},
			"log_path": name + ".log",
			"mounts":   []map[string]any{{"container_path": "/shared", "host_path": shared}},
		})
		start := time.Now()
		r, err := crictl(ctx, "create", pod, cfg, podCfg)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = strings.TrimSpace(r.stdout)
		if _, err := crictl(ctx, "start", ids[name]); err != nil {
			t.Fatal(err)
		}
		t.Logf("create+start %s: %.1f s", name, time.Since(start).Seconds())
	}
	boot := map[string]string{}
	for deadline := time.Now().Add(60 * time.Second); len(boot) < 2; time.Sleep(200 * time.Millisecond) {
		for _, name := range []string{"c1", "c2"} {
			if b, err := os.ReadFile(filepath.Join(shared, name+".boot")); err == nil && len(b) > 0 {
				boot[name] = strings.TrimSpace(string(b))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the containers did not write their boot ids into the emptyDir within 60 s: %v", boot)
		}
	}
	procs := descendants()
	t.Logf("the pod on the host: %d processes %v, %.0f MiB resident", len(procs), procs, rssMiB(procs))
	host, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if boot["c1"] != boot["c2"] || boot["c1"] == strings.TrimSpace(string(host)) {
		t.Fatalf("boot ids: c1 %q, c2 %q, host %q: want both the same box's", boot["c1"], boot["c2"], host)
	}

	// Own roots, one emptyDir.
	if r, err := crictl(ctx, "exec", "-s", ids["c1"], "sh", "-c", "echo mine > /own-c1; cat /shared/from-c2"); err != nil || strings.TrimSpace(r.stdout) != "c2" {
		t.Fatalf("exec in c1: %q %v", r.stdout, err)
	}
	if r, err := crictl(ctx, "exec", "-s", ids["c2"], "sh", "-c", "test -e /own-c1 && echo shared-root; cat /shared/from-c1"); err != nil || strings.TrimSpace(r.stdout) != "c1" {
		t.Fatalf("exec in c2: %q %v", r.stdout, err)
	}
	if r, err := crictl(ctx, "logs", ids["c1"]); err != nil || !strings.Contains(r.stdout, "c1-log") {
		t.Fatalf("logs c1: %q %v", r.stdout, err)
	}

	// containerd restarts; the pod runs on and is found again.
	stopContainerd()
	if err := startContainerd(); err != nil {
		t.Fatal(err)
	}
	r, err = crictl(ctx, "ps", "-q", "--state", "running")
	if err != nil || !strings.Contains(r.stdout, ids["c1"]) || !strings.Contains(r.stdout, ids["c2"]) {
		t.Fatalf("after containerd's restart, running: %q %v", r.stdout, err)
	}
	if r, err := crictl(ctx, "exec", "-s", ids["c2"], "cat", "/shared/from-c1"); err != nil || strings.TrimSpace(r.stdout) != "c1" {
		t.Fatalf("exec after containerd's restart: %q %v", r.stdout, err)
	}

	if _, err := crictl(ctx, "stop", "--timeout", "10", ids["c1"]); err != nil {
		t.Fatal(err)
	}
	r, err = crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.status.state}}", ids["c1"])
	if err != nil || strings.TrimSpace(r.stdout) != "CONTAINER_EXITED" {
		t.Fatalf("c1 after stop: %q %v", r.stdout, err)
	}
	if _, err := crictl(ctx, "rmp", "-f", pod); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 60*time.Second)
	if b, err := os.ReadFile(filepath.Join(shared, "from-c1")); err != nil || strings.TrimSpace(string(b)) != "c1" {
		t.Errorf("the emptyDir's data went with the pod: %q %v", b, err)
	}
}
