package containerd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCRILimits runs a pod's containers with limits in the box's cgroups:
// the limits of the CRI config are the container cgroup's (read inside the
// box), crictl update raises and lowers them on the running container,
// crictl stats counts what the cgroup is charged (a tmpfs file no process
// maps included), a child OOM-killed in a running container is told to CRI,
// and a container that allocates past its memory limit is OOM-killed with
// the reason OOMKilled.
func TestCRILimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pauseImage(t, ctx)
	dir := t.TempDir()
	podCfg := writeJSON(t, filepath.Join(dir, "pod.json"), map[string]any{
		"metadata":      map[string]any{"name": "lim", "namespace": "default", "uid": "uid-lim", "attempt": 0},
		"log_directory": filepath.Join(dir, "logs"),
		"linux":         map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	})
	r, err := crictl(ctx, "runp", "--runtime", "boxlite", podCfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.TrimSpace(r.stdout)
	defer crictl(context.Background(), "rmp", "-f", pod) //nolint:errcheck

	create := func(name string, mem int64, command string) string {
		t.Helper()
		cfg := writeJSON(t, filepath.Join(dir, name+".json"), map[string]any{
			"metadata": map[string]any{"name": name},
			"image":    map[string]any{"image": "docker.io/library/alpine:latest"},
			"command":  []string{"sh", "-c", command},
			"log_path": name + ".log",
			"linux": map[string]any{"resources": map[string]any{"memory_limit_in_bytes": mem,
				"cpu_quota": 50000, "cpu_period": 100000, "cpu_shares": 512}},
		})
		r, err := crictl(ctx, "create", pod, cfg, podCfg)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(r.stdout)
		if _, err := crictl(ctx, "start", id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	lim := create("lim", 96<<20, "exec sleep 1000")
	cg := "/sys/fs/cgroup/boxlite/" + lim
	read := func(files ...string) string {
		t.Helper()
		r, err := crictl(ctx, "exec", "-s", lim, "sh", "-c", "cat /proc/self/cgroup; cd "+cg+" && cat "+strings.Join(files, " "))
		if err != nil {
			t.Fatalf("read the cgroup in the box: %v %s", err, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	got := read("memory.max", "cpu.max", "cpu.weight")
	if want := "0::/boxlite/" + lim + "\n100663296\n50000 100000\n20"; got != want {
		t.Fatalf("the container's cgroup in the box: %q, want %q (its process, memory.max, cpu.max, cpu.weight)", got, want)
	}
	for _, mem := range []int64{160 << 20, 64 << 20} {
		if _, err := crictl(ctx, "update", "--memory", strconv.FormatInt(mem, 10), "--cpu-quota", "20000", "--cpu-period", "100000", lim); err != nil {
			t.Fatal(err)
		}
		if got, want := read("memory.max", "cpu.max"), "0::/boxlite/"+lim+"\n"+strconv.FormatInt(mem, 10)+"\n20000 100000"; got != want {
			t.Fatalf("after crictl update --memory %d: %q, want %q", mem, got, want)
		}
	}

	// 24 MiB in a tmpfs file: charged to the cgroup, mapped by no process.
	if _, err := crictl(ctx, "exec", "-s", lim, "dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1M", "count=24"); err != nil {
		t.Fatal(err)
	}
	r, err = crictl(ctx, "stats", "-o", "json", "--id", lim)
	var st struct {
		Stats []struct {
			Memory struct{ WorkingSetBytes struct{ Value string } }
		}
	}
	if err != nil || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Stats) != 1 {
		t.Fatalf("crictl stats: %q %v", r.stdout, err)
	}
	ws, _ := strconv.ParseUint(st.Stats[0].Memory.WorkingSetBytes.Value, 10, 64)
	if ws < 24<<20 || ws > 64<<20 {
		t.Errorf("crictl stats: working set %d bytes; want the cgroup's charge, the 24 MiB file and the sleep, under its 64 MiB limit", ws)
	}
	t.Logf("crictl stats: working set %.1f MiB", float64(ws)/(1<<20))

	// A child past the limit: the kernel kills it, the container runs on,
	// and the OOM event (from the cgroup's watch: no exit came) reaches CRI.
	child := create("child", 32<<20, `awk 'BEGIN { s = "x"; while (1) s = s s }'; exec sleep 1000`)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		r, err := crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.reason}}", child)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(r.stdout); got == "CONTAINER_RUNNING OOMKilled" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("a container whose child went past its 32 MiB limit: %q, want CONTAINER_RUNNING OOMKilled", got)
		}
	}
	if _, err := crictl(ctx, "stop", "--timeout", "0", child); err != nil {
		t.Fatal(err)
	}

	// Past its limit: the kernel kills it, CRI says why.
	oom := create("oom", 32<<20, `exec awk 'BEGIN { s = "x"; while (1) s = s s }'`)
	var state, reason string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		r, err := crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.reason}} {{.status.exitCode}}", oom)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(r.stdout)
		if len(f) >= 2 {
			state, reason = f[0], f[1]
		}
		// The reason comes with the OOM event, which the CRI plugin takes
		// from containerd's event stream while it sees the exit from its own
		// Wait: the two may land a moment apart.
		if state == "CONTAINER_EXITED" && reason == "OOMKilled" || time.Now().After(deadline) {
			t.Logf("the allocating container: %s", strings.TrimSpace(r.stdout))
			break
		}
	}
	if state != "CONTAINER_EXITED" || reason != "OOMKilled" {
		t.Fatalf("a container past its 32 MiB limit: state %s, reason %q; want CONTAINER_EXITED, OOMKilled", state, reason)
	}
	if _, err := crictl(ctx, "rm", oom); err != nil {
		t.Fatal(err)
	}
	if _, err := crictl(ctx, "rmp", "-f", pod); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 60*time.Second)
}
