package shim

import (
	"errors"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
)

// TestHealthRecord: docker's HEALTHCHECK rules as the shim folds results:
// failures in the start period do not count, retries failures in a row
// make the box unhealthy, a pass makes it healthy and clears the count.
func TestHealthRecord(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := &health{cfg: protocol.HealthCheck{Retries: 2, StartPeriod: 10 * time.Second}, since: t0,
		st: protocol.HealthStatus{State: protocol.HealthStarting}}
	fail := errors.New("exit code 1")
	step := func(err error, at time.Duration, state string, failures int) {
		t.Helper()
		h.record(err, t0.Add(at))
		st := h.status()
		if st.State != state || st.Failures != failures || st.LastCheckMs != t0.Add(at).UnixMilli() {
			t.Fatalf("after %v at %s: %+v, want %s with %d failures", err, at, st, state, failures)
		}
	}
	step(fail, 1*time.Second, protocol.HealthStarting, 0) // in the start period: not counted
	step(fail, 9*time.Second, protocol.HealthStarting, 0)
	step(fail, 11*time.Second, protocol.HealthStarting, 1)
	step(fail, 12*time.Second, protocol.HealthUnhealthy, 2)
	if h.status().LastError != "exit code 1" {
		t.Errorf("last error %q", h.status().LastError)
	}
	step(nil, 13*time.Second, protocol.HealthHealthy, 0)
	if h.status().LastError != "" {
		t.Errorf("a pass keeps the last error %q", h.status().LastError)
	}
	step(fail, 14*time.Second, protocol.HealthHealthy, 1) // one failure of two: still healthy
	step(nil, 15*time.Second, protocol.HealthHealthy, 0)
	// A probe that cannot run any more (the box stopped taking its
	// frames) makes the box unhealthy at once, whatever the retries.
	h.fail(errProbeBroken, t0.Add(16*time.Second))
	if st := h.status(); st.State != protocol.HealthUnhealthy || st.LastError != errProbeBroken.Error() {
		t.Errorf("after a broken probe: %+v", st)
	}
}

func TestHealthCheckBounds(t *testing.T) {
	ok := protocol.HealthCheck{Interval: time.Second, Timeout: time.Second, Retries: 1, Command: []string{"true"}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*protocol.HealthCheck){
		func(h *protocol.HealthCheck) { h.Interval = time.Millisecond },
		func(h *protocol.HealthCheck) { h.Timeout = 0 },
		func(h *protocol.HealthCheck) { h.Retries = 0 },
		func(h *protocol.HealthCheck) { h.Retries = protocol.MaxHealthRetries + 1 },
		func(h *protocol.HealthCheck) { h.StartPeriod = -1 },
		func(h *protocol.HealthCheck) { h.Command = nil },
		func(h *protocol.HealthCheck) { h.Command = []string{""} },
	} {
		h := ok
		bad(&h)
		if h.Check() == nil {
			t.Errorf("%+v passed", h)
		}
	}
}
