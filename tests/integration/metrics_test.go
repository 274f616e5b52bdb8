package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// TestMetrics counts execs on the shared box: the box's counters (kept by
// its shim) and the runtime's (in this process) move by exactly what the
// test did, a second process (the CLI) reads the same box counters, and the
// samples and boot timings are there.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	box0, err := shared.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt0 := rt.Metrics()

	// Three that run (one exits non-zero: still executed, not an error), two that never start.
	runIn(t, shared, sh("echo hello"))           // 6 bytes out
	runIn(t, shared, sh("echo err >&2; exit 3")) // 4 bytes out
	e, err := shared.Exec(ctx, boxlite.Command{Argv: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(e.Stdin, "abc") // 3 bytes in, 3 out
	e.Stdin.Close()
	if res, err := e.Collect(ctx); err != nil || string(res.Stdout) != "abc" {
		t.Fatalf("cat: %v %q", err, res.Stdout)
	}
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"no-such-binary"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing binary: %v", err)
	}
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"true"}, Cwd: "/no/such/dir"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing cwd: %v", err)
	}
	// Refused before it reaches the box: counted nowhere.
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"true"}, Timeout: -time.Second}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("negative timeout: %v", err)
	}

	box1, err := shared.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt1 := rt.Metrics()
	check := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s grew by %d, want %d", what, got, want)
		}
	}
	check("box commands_executed_total", box1.CommandsExecutedTotal-box0.CommandsExecutedTotal, 5)
	check("box exec_errors_total", box1.ExecErrorsTotal-box0.ExecErrorsTotal, 2)
	check("box bytes_sent_total", box1.BytesSentTotal-box0.BytesSentTotal, 3)
	check("box bytes_received_total", box1.BytesReceivedTotal-box0.BytesReceivedTotal, 13)
	check("runtime total_commands_executed", rt1.TotalCommandsExecuted-rt0.TotalCommandsExecuted, 5)
	check("runtime total_exec_errors", rt1.TotalExecErrors-rt0.TotalExecErrors, 2)
	if rt1.NumRunningBoxes < 1 || rt1.BoxesCreatedTotal < 1 {
		t.Errorf("runtime metrics %+v: the shared box is running and was created here", rt1)
	}

	if box1.MemoryBytes == nil || *box1.MemoryBytes < 16<<20 {
		t.Errorf("memory_bytes %v: want the VMM's resident memory (more than 16 MiB)", box1.MemoryBytes)
	}
	if box1.GuestBootDurationMs <= 0 {
		t.Errorf("guest_boot_duration_ms %v", box1.GuestBootDurationMs)
	}
	stages := map[string]*float64{"total_create_duration_ms": box1.TotalCreateDurationMs, "stage_image_prepare_ms": box1.StageImagePrepareMs,
		"stage_box_config_ms": box1.StageBoxConfigMs, "stage_boot_queue_ms": box1.StageBootQueueMs,
		"stage_box_spawn_ms": box1.StageBoxSpawnMs, "stage_container_init_ms": box1.StageContainerInitMs,
		"stage_guest_rootfs_ms": box1.StageGuestRootfsMs, "stage_filesystem_setup_ms": box1.StageFilesystemSetupMs}
	for name, v := range stages {
		if v == nil || *v < 0 {
			t.Errorf("%s: %v", name, v)
		}
	}
	if box1.TotalCreateDurationMs != nil && box1.StageBoxSpawnMs != nil &&
		(*box1.StageBoxSpawnMs < box1.GuestBootDurationMs || *box1.TotalCreateDurationMs < *box1.StageBoxSpawnMs) {
		t.Errorf("total %v >= spawn %v >= guest boot %v does not hold", *box1.TotalCreateDurationMs, *box1.StageBoxSpawnMs, box1.GuestBootDurationMs)
	}
	if box1.NetworkBytesSent == nil || box1.NetworkTCPConnections == nil {
		t.Errorf("network counters missing on a box with a network: %+v", box1)
	}

	// A second process sees the same box counters.
	out, errOut, code := cli(t, "stats", "--json", "shared")
	var rows []struct {
		Name    string             `json:"name"`
		Metrics boxlite.BoxMetrics `json:"metrics"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("boxlite stats --json shared: exit %d, %q, %s", code, out, errOut)
	}
	if m := rows[0].Metrics; rows[0].Name != "shared" || m.CommandsExecutedTotal != box1.CommandsExecutedTotal ||
		m.ExecErrorsTotal != box1.ExecErrorsTotal || m.BytesReceivedTotal != box1.BytesReceivedTotal {
		t.Errorf("the CLI sees %+v, this process %+v", rows[0], box1)
	}
	out, errOut, code = cli(t, "stats", "shared")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "CPU %") || !strings.HasPrefix(lines[1], "shared ") {
		t.Errorf("boxlite stats shared: exit %d\n%s%s", code, out, errOut)
	}

	// A busy box shows CPU use within a sampling interval or two.
	busy, err := shared.Exec(ctx, sh("end=$(($(date +%s)+4)); while [ $(date +%s) -lt $end ]; do :; done"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	m, err := shared.Metrics(ctx)
	if err != nil || m.CPUPercent == nil || *m.CPUPercent <= 0 {
		t.Errorf("cpu_percent of a busy box: %v %v", m.CPUPercent, err)
	} else {
		t.Logf("busy box: cpu %.0f%%, memory %d MiB", *m.CPUPercent, *m.MemoryBytes>>20)
	}
	busy.Collect(ctx)
}
