package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/boxlite/boxlite"
)

func TestPrintStats(t *testing.T) {
	cpu, mem, rx, tx := 12.34, uint64(300<<20), uint64(1536), uint64(10)
	rows := []boxStats{
		{ID: "0123456789ab", Name: "web", Metrics: boxlite.BoxMetrics{CommandsExecutedTotal: 5, ExecErrorsTotal: 2,
			CPUPercent: &cpu, MemoryBytes: &mem, NetworkBytesSent: &rx, NetworkBytesReceived: &tx}},
		{ID: "ba9876543210"}, // an old shim, no network: dashes
	}
	var out bytes.Buffer
	printStats(&out, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"NAME", "ID", "CPU", "%", "MEM", "EXECS", "EXEC", "ERRORS", "NET", "RX", "/", "TX"},
		{"web", "0123456789ab", "12.3%", "300.0MiB", "5", "2", "1.5KiB", "/", "10B"},
		{"ba9876543210", "ba9876543210", "-", "-", "0", "0", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}
