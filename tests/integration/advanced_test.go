package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// statusField is a field of /proc/self/status as a box process sees it.
func statusField(t *testing.T, b *boxlite.Box, field string) string {
	t.Helper()
	res := runIn(t, b, sh("grep '^"+field+":' /proc/self/status"))
	_, v, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), ":")
	return strings.TrimSpace(v)
}

func capBnd(t *testing.T, b *boxlite.Box) uint64 {
	t.Helper()
	v := statusField(t, b, "CapBnd")
	m, err := strconv.ParseUint(v, 16, 64)
	if err != nil {
		t.Fatalf("CapBnd %q: %v", v, err)
	}
	return m
}

// TestAdvancedOptions: BoxLite's AdvancedBoxOptions on one real box:
// capabilities added and dropped, the development preset (no seccomp filter
// in the box, no host jail for its VMM) with resource limits, and a health
// check going starting -> healthy -> unhealthy -> healthy as its command
// passes and fails. The shared box shows the defaults.
func TestAdvancedOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Refused before any boot, naming what is wrong.
	for _, c := range []struct {
		opt  boxlite.BoxOption
		want string
	}{
		{boxlite.WithCapabilities(boxlite.Capabilities{Add: []string{"NET_ADMN"}}), `"NET_ADMN"`},
		{boxlite.WithCapabilities(boxlite.Capabilities{Drop: []string{"CAP_BOGUS"}}), `"CAP_BOGUS"`},
		{boxlite.WithHealthCheck(boxlite.HealthCheck{Interval: time.Second, Timeout: time.Second, Retries: 0}), "retries"},
		{boxlite.WithSecurity(boxlite.SecurityOptions{JailerEnabled: true}), "network_enabled"},
	} {
		_, err := rt.Create(ctx, "alpine:latest", c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create: err %v, want one naming %s", err, c.want)
		}
		if errors.Is(err, errdefs.ErrInternal) {
			t.Errorf("create: %v is not a caller's error", err)
		}
	}

	// The defaults, on the shared box.
	if got := capBnd(t, shared); got != protocol.DefaultCaps {
		t.Errorf("default CapBnd %#x, want %#x", got, protocol.DefaultCaps)
	}
	if got := statusField(t, shared, "Seccomp"); got != "2" {
		t.Errorf("default Seccomp %q, want 2 (a filter)", got)
	}
	if h := shared.Info().Health; h.State != boxlite.HealthNone {
		t.Errorf("a box without a health check: %+v", h)
	}

	sec := boxlite.SecurityDevelopment()
	files, fsize := uint64(77), uint64(1<<20)
	sec.MaxOpenFiles, sec.MaxFileSize = &files, &fsize
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest",
		boxlite.WithCapabilities(boxlite.Capabilities{Add: []string{"net_admin", "CAP_SYS_PTRACE"}, Drop: []string{"CHOWN"}}),
		boxlite.WithSecurity(sec),
		boxlite.WithHealthCheck(boxlite.HealthCheck{Interval: 500 * time.Millisecond, Timeout: 3 * time.Second, Retries: 2,
			Command: []string{"test", "-e", "/tmp/healthy"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)

	want, _ := protocol.CapMask(protocol.DefaultCaps, []string{"NET_ADMIN", "SYS_PTRACE"}, []string{"CHOWN"})
	if got := capBnd(t, b); got != want {
		t.Errorf("CapBnd %#x, want %#x (%v)", got, want, protocol.CapNames(want))
	}
	if got := statusField(t, b, "CapEff"); got != fmt.Sprintf("%016x", want) {
		t.Errorf("root's CapEff %s, want %016x", got, want)
	}
	if got := statusField(t, b, "Seccomp"); got != "0" {
		t.Errorf("development: Seccomp %q, want 0", got)
	}
	res := runIn(t, b, sh("ulimit -n; ulimit -f; dd if=/dev/zero of=/tmp/big bs=1024 count=2048 2>&1; ls -l /tmp/big"))
	out := string(res.Stdout)
	// busybox's ulimit -f counts 512-byte blocks.
	if !strings.HasPrefix(out, "77\n2048\n") || !strings.Contains(out, " 1048576 ") {
		t.Errorf("limits: %q", out)
	}
	// The VMM runs unjailed, the box without its filter: info says so.
	warnings := strings.Join(b.Info().Runtime.Warnings, "\n")
	if !strings.Contains(warnings, "vmm confinement: off") || !strings.Contains(warnings, "without the box's seccomp filter") {
		t.Errorf("warnings: %s", warnings)
	}

	// Health: starting (no /tmp/healthy), then healthy, then unhealthy
	// after 2 failures, then healthy again.
	waitHealth := func(state string, within time.Duration) boxlite.HealthStatus {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			h, err := b.Health(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if h.State == state {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %+v, want %s within %s", h, state, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if h := b.Info().Health; h.State != boxlite.HealthStarting && h.State != boxlite.HealthUnhealthy {
		t.Errorf("before any check passed: %+v", h)
	}
	start := time.Now()
	runIn(t, b, sh("touch /tmp/healthy"))
	h := waitHealth(boxlite.HealthHealthy, 30*time.Second)
	t.Logf("healthy after %s: %+v", time.Since(start), h)
	if h.Failures != 0 || h.LastCheck.IsZero() {
		t.Errorf("healthy: %+v", h)
	}
	start = time.Now()
	runIn(t, b, sh("rm /tmp/healthy"))
	h = waitHealth(boxlite.HealthUnhealthy, 30*time.Second)
	t.Logf("unhealthy after %s: %+v", time.Since(start), h)
	if h.Failures < 2 || !strings.Contains(h.LastError, "exit code 1") {
		t.Errorf("unhealthy: %+v", h)
	}
	runIn(t, b, sh("touch /tmp/healthy"))
	waitHealth(boxlite.HealthHealthy, 30*time.Second)
	// A pause and a resume keep the box's health (the same machine, as
	// docker's unpause): healthy at once, not starting over.
	if _, err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Health(ctx); err != nil || h.State != boxlite.HealthHealthy || h.LastCheck.IsZero() {
		t.Errorf("health right after a resume: %+v, %v; want healthy, as at the pause", h, err)
	}
	// Checks are not the box's commands.
	m, err := b.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.CommandsExecutedTotal > 20 {
		t.Errorf("metrics count health checks: %d commands", m.CommandsExecutedTotal)
	}
	if hc := b.Info().Config.HealthCheck; hc == nil || hc.Retries != 2 {
		t.Errorf("info's health check: %+v", hc)
	}
}
