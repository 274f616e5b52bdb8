package abi

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

func TestSecondsDuration(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want time.Duration
	}{
		{0, 0}, {1, time.Second}, {1.5, 1500 * time.Millisecond}, {0.0001, time.Millisecond},
		{1e-300, time.Millisecond}, {MaxSeconds, MaxSeconds * time.Second},
	} {
		got, err := Seconds(c.in).Duration("t")
		if err != nil || got != c.want {
			t.Errorf("Seconds(%v) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []float64{-1, -1e-9, math.NaN(), math.Inf(1), math.Inf(-1), MaxSeconds * 2, 1e300} {
		_, err := Seconds(bad).Duration("x_secs")
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "x_secs") {
			t.Errorf("Seconds(%v): %v, want invalid_argument naming the field", bad, err)
		}
	}
	if _, err := Seconds(0).Positive("boot_timeout_secs"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Positive(0) = %v", err)
	}
	if d, err := Seconds(2).Positive("p"); err != nil || d != 2*time.Second {
		t.Errorf("Positive(2) = %v, %v", d, err)
	}
	if s := SecondsOf(1500 * time.Millisecond); s != 1.5 {
		t.Errorf("SecondsOf = %v", s)
	}
}

func TestMillisWait(t *testing.T) {
	if !Millis(0).Poll() || Millis(-1).Poll() || Millis(5).Poll() {
		t.Error("only 0 polls")
	}
	ctx, cancel := Millis(-1).Context(context.Background())
	if _, ok := ctx.Deadline(); ok {
		t.Error("a negative wait has a deadline")
	}
	cancel()
	for _, m := range []Millis{250, math.MaxInt64} {
		ctx, cancel := m.Context(context.Background())
		if d, ok := ctx.Deadline(); !ok || time.Until(d) <= 0 {
			t.Errorf("%d ms: deadline %v, %v", m, d, ok)
		}
		cancel()
	}
}

// unitless are the numeric wire fields whose name needs no unit: counts,
// ids and codes.
var unitless = map[string]bool{
	"cpus": true, "rows": true, "cols": true, "pid": true, "restarts": true, "exit_code": true, "execution_count": true,
	"host_port": true, "guest_port": true, "shim_pid": true, "vmm_pid": true,
	"tcp_connections": true, "tcp_errors": true, "udp_flows": true, "network_tcp_connections": true, "network_tcp_errors": true, "max_entries": true,
	"boxes":             true, // a warm pool's count of boxes
	"num_running_boxes": true, "num_paused_boxes": true, "total_commands_executed": true, "total_exec_errors": true,
	// BoxLite's SnapshotInfo names it so (unix seconds, as documented).
	"created_at": true,
	// BoxLite's SecurityOptions and HealthCheckOptions (counts).
	"max_open_files": true, "max_processes": true, "retries": true, "failures": true,
}

// Every quantity on the wire names its unit.
func TestWireFieldsNameTheirUnits(t *testing.T) {
	units := []string{"_mib", "_gb", "_bytes", "_secs", "_ms", "_unix", "_total", "_percent", "_bytes_total"}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64, reflect.Int32, reflect.Uint32:
				ok := unitless[name] || strings.Contains(name, "bytes")
				for _, u := range units {
					ok = ok || strings.HasSuffix(name, u)
				}
				if !ok {
					t.Errorf("%s.%s (%q) is a quantity without a unit in its name", typ.Name(), f.Name, name)
				}
			default:
				walk(f.Type, path+"."+f.Name)
			}
		}
	}
	for _, v := range []any{BoxOptions{}, BoxInfo{}, Command{}, CopyOptions{}, SessionOptions{}, ShellCommand{},
		CellOptions{}, CellResult{}, CodeOptions{}, CodeExecution{}, SessionInfo{}, ImageInfo{}, BoxMetrics{}, RuntimeMetrics{}, SnapshotInfo{},
		RuntimeOptions{}, RestOptions{}, CloneOptions{}} {
		walk(reflect.TypeOf(v), "")
	}
}
