package boxlite

import (
	"context"
	"fmt"
	"time"

	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
)

// HealthCheck is BoxLite's HealthCheckOptions (protocol.HealthCheck): the
// box's shim runs Command in the box every Interval and waits up to Timeout
// for it to exit 0; failures in the StartPeriod after the box became ready
// do not count, Retries failures in a row make it unhealthy, a success
// healthy again. The shim runs the checks, so they go on whichever process
// made or uses the box; they are no activity for auto-pause and not in its
// metrics. An empty Command is DefaultHealthCommand; it runs as root, in
// /, with a default PATH.
type HealthCheck = protocol.HealthCheck

// DefaultHealthCommand is a check's command unless one is given: BoxLite
// checks that the guest agent answers, which here means it can start a
// process in the box's sandbox.
var DefaultHealthCommand = []string{"true"}

// DefaultHealthCheck is BoxLite's HealthCheckOptions(): every 30 s, 10 s
// timeout, 3 retries, a 60 s start period.
func DefaultHealthCheck() HealthCheck {
	return HealthCheck{Interval: abi.DefaultHealthInterval, Timeout: abi.DefaultHealthTimeout, Retries: abi.DefaultHealthRetries,
		StartPeriod: abi.DefaultHealthStartPeriod}
}

// Health states (HealthStatus.State), BoxLite's HealthState values.
const (
	HealthNone      = protocol.HealthNone
	HealthStarting  = protocol.HealthStarting
	HealthHealthy   = protocol.HealthHealthy
	HealthUnhealthy = protocol.HealthUnhealthy
)

// HealthStatus is BoxLite's HealthStatus: State is HealthNone for a box
// without a health check or not running (a start, a resume or a restore
// begins again at HealthStarting).
type HealthStatus struct {
	State     string    `json:"state"`
	Failures  int       `json:"failures"`
	LastCheck time.Time `json:"last_check,omitzero"`
	LastError string    `json:"last_error,omitempty"` // why the last check failed
}

// WithHealthCheck gives the box a health check.
func WithHealthCheck(h HealthCheck) BoxOption {
	return func(cfg *BoxConfig) error {
		if len(h.Command) == 0 {
			h.Command = DefaultHealthCommand
		}
		h.Command = append([]string(nil), h.Command...)
		if err := h.Check(); err != nil {
			return err
		}
		cfg.HealthCheck = &h
		return nil
	}
}

// healthRequestTimeout bounds Info's question to the shim.
const healthRequestTimeout = 2 * time.Second

// Health is the box's health now. A box without a health check, or not
// running, is HealthNone.
func (b *Box) Health(ctx context.Context) (HealthStatus, error) {
	none := HealthStatus{State: HealthNone}
	b.mu.Lock()
	c, running, has := b.conn, b.state == StateRunning, b.rec.Config.HealthCheck != nil
	b.mu.Unlock()
	if !running || !has || c == nil {
		return none, nil
	}
	var info protocol.Info
	if err := c.requestWithin(ctx, protocol.TInfo, nil, &info, healthRequestTimeout); err != nil {
		return none, fmt.Errorf("health: %w", err)
	}
	h := info.Health
	if h == nil {
		return none, nil
	}
	st := HealthStatus{State: h.State, Failures: h.Failures, LastError: h.LastError}
	if h.LastCheckMs > 0 {
		st.LastCheck = time.UnixMilli(h.LastCheckMs).UTC()
	}
	return st, nil
}
