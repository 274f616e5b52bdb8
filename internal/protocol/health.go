package protocol

import (
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// HealthCheck is a box's health check (BoxLite's HealthCheckOptions; the
// root package's HealthCheck), run by its shim: every Interval it runs
// Command in the box (an exec like any other, on a stream of the shim's
// own) and waits up to Timeout for it to exit 0. Failures in the first
// StartPeriod after the box became ready do not count; Retries failures in
// a row make the box unhealthy, a success healthy again. The shim's
// configuration and the box's record carry it as JSON.
type HealthCheck struct {
	Interval    time.Duration `json:"interval"`
	Timeout     time.Duration `json:"timeout"`
	Retries     int           `json:"retries"`
	StartPeriod time.Duration `json:"start_period"`
	Command     []string      `json:"command,omitempty"`
}

// Health check bounds: an interval or timeout under MinHealthInterval would
// keep a box under emulation busy with checks; MaxHealthArgv bounds the
// command as an exec's argv is.
const (
	MinHealthInterval = 100 * time.Millisecond
	MaxHealthRetries  = 1000
	MaxHealthArgv     = 64
)

// Check reports what is wrong with h, as ErrInvalidArgument naming the
// field as BoxLite's HealthCheckOptions does.
func (h HealthCheck) Check() error {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "health_check: "+format, args...)
	}
	switch {
	case h.Interval < MinHealthInterval:
		return bad("interval %s is under %s", h.Interval, MinHealthInterval)
	case h.Timeout < MinHealthInterval:
		return bad("timeout %s is under %s", h.Timeout, MinHealthInterval)
	case h.Retries < 1 || h.Retries > MaxHealthRetries:
		return bad("retries %d is outside 1..%d", h.Retries, MaxHealthRetries)
	case h.StartPeriod < 0:
		return bad("start_period %s is negative", h.StartPeriod)
	case len(h.Command) == 0 || len(h.Command) > MaxHealthArgv || h.Command[0] == "":
		return bad("command must be 1 to %d words, the first not empty", MaxHealthArgv)
	}
	return nil
}

// Health states, BoxLite's HealthState values: none (no health check, or
// the box is not running), starting (no check has passed yet, within or
// after the start period), healthy, unhealthy.
const (
	HealthNone      = "none"
	HealthStarting  = "starting"
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// HealthStatus is a running box's health, in Info.
type HealthStatus struct {
	State    string `msgpack:"state" json:"state"`
	Failures int    `msgpack:"failures" json:"failures"` // failed checks in a row that counted
	// LastCheckMs is when the last check ended (Unix milliseconds, host
	// clock); 0: none yet.
	LastCheckMs int64 `msgpack:"last_check_ms,omitempty" json:"last_check_ms,omitempty"`
	// LastError says why the last check failed ("" after a success).
	LastError string `msgpack:"last_error,omitempty" json:"last_error,omitempty"`
}
