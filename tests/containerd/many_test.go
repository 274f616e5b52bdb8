package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// manyPods is how many pods TestCRIManyPods starts at once:
// BOXLITE_K8S_PODS, default 3 (the figure is for 20).
func manyPods(t *testing.T) int {
	n := 3
	if v := os.Getenv("BOXLITE_K8S_PODS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100 {
			t.Fatalf("BOXLITE_K8S_PODS=%q: want 1 to 100", v)
		}
	}
	return n
}

// TestCRIManyPods starts pods at once through CRI, each with one
// container, and reports the time to each pod's container running and the
// host memory per pod; then removes them all.
func TestCRIManyPods(t *testing.T) {
	n := manyPods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pauseImage(t, ctx)
	dir := t.TempDir()
	type podRun struct {
		pod, ctr string
		took     time.Duration
		err      error
	}
	runs := make([]podRun, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range runs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t0 := time.Now()
			name := fmt.Sprintf("many%d", i)
			podCfg := writeJSON(t, filepath.Join(dir, name+"-pod.json"), map[string]any{
				"metadata":      map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "attempt": 0},
				"log_directory": filepath.Join(dir, name),
				"linux":         map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
			})
			cCfg := writeJSON(t, filepath.Join(dir, name+"-c.json"), map[string]any{
				"metadata": map[string]any{"name": "c"}, "image": map[string]any{"image": "docker.io/library/alpine:latest"},
				"command": []string{"sleep", "1000"}, "log_path": "c.log",
			})
			r := &runs[i]
			res, err := crictl(ctx, "runp", "--runtime", "boxlite", podCfg)
			if err != nil {
				r.err = err
				return
			}
			r.pod = strings.TrimSpace(res.stdout)
			if res, err = crictl(ctx, "create", r.pod, cCfg, podCfg); err != nil {
				r.err = err
				return
			}
			r.ctr = strings.TrimSpace(res.stdout)
			if _, err := crictl(ctx, "start", r.ctr); err != nil {
				r.err = err
				return
			}
			r.took = time.Since(t0)
		}(i)
	}
	wg.Wait()
	total := time.Since(start)
	defer func() {
		for _, r := range runs {
			if r.pod != "" {
				crictl(context.Background(), "rmp", "-f", r.pod) //nolint:errcheck
			}
		}
	}()
	var took []float64
	for i, r := range runs {
		if r.err != nil {
			t.Fatalf("pod %d: %v", i, r.err)
		}
		took = append(took, r.took.Seconds())
	}
	sort.Float64s(took)
	res, err := crictl(ctx, "ps", "-q", "--state", "running")
	if err != nil || len(strings.Fields(res.stdout)) != n {
		t.Fatalf("running containers: %q %v, want %d", res.stdout, err, n)
	}
	procs := descendants()
	rss := rssMiB(procs)
	t.Logf("%d pods at once: all running after %.1f s; per pod (runp+create+start) median %.1f s, max %.1f s; host memory %.0f MiB resident, %.0f MiB per pod (%d processes)",
		n, total.Seconds(), took[len(took)/2], took[len(took)-1], rss, rss/float64(n), len(procs))
	for _, r := range runs {
		if _, err := crictl(ctx, "rmp", "-f", r.pod); err != nil {
			t.Error(err)
		}
	}
	awaitNothingLeft(t, 2*time.Minute)
}
