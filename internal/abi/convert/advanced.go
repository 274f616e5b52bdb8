package convert

import (
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/abi"
)

// advancedOptions are the core options of a's fields.
func advancedOptions(a *abi.Advanced) ([]boxlite.BoxOption, error) {
	if a == nil {
		return nil, nil
	}
	var opts []boxlite.BoxOption
	if c := a.Capabilities; c != nil {
		opts = append(opts, boxlite.WithCapabilities(boxlite.Capabilities{Add: c.Add, Drop: c.Drop}))
	}
	if s := a.Security; s != nil {
		opts = append(opts, boxlite.WithSecurity(Security(*s)))
	}
	if h := a.HealthCheck; h != nil {
		hc, err := healthCheck(*h)
		if err != nil {
			return nil, err
		}
		opts = append(opts, boxlite.WithHealthCheck(hc))
	}
	return opts, nil
}

// Security is the core's form of s: an absent field is the standard
// preset's.
func Security(s abi.Security) boxlite.SecurityOptions {
	out := boxlite.SecurityStandard()
	for _, b := range []struct {
		v   *bool
		dst *bool
	}{{s.JailerEnabled, &out.JailerEnabled}, {s.SeccompEnabled, &out.SeccompEnabled},
		{s.NetworkEnabled, &out.NetworkEnabled}, {s.CloseFDs, &out.CloseFDs}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	out.MaxOpenFiles, out.MaxFileSize, out.MaxProcesses, out.MaxMemory, out.MaxCPUTime =
		s.MaxOpenFiles, s.MaxFileSize, s.MaxProcesses, s.MaxMemory, s.MaxCPUTime
	return out
}

func healthCheck(h abi.HealthCheck) (boxlite.HealthCheck, error) {
	hc := boxlite.DefaultHealthCheck()
	for _, d := range []struct {
		v    *abi.Seconds
		dst  *time.Duration
		name string
	}{{h.IntervalSecs, &hc.Interval, "interval_secs"}, {h.TimeoutSecs, &hc.Timeout, "timeout_secs"},
		{h.StartPeriodSecs, &hc.StartPeriod, "start_period_secs"}} {
		if d.v == nil {
			continue
		}
		v, err := d.v.Duration("health_check: " + d.name)
		if err != nil {
			return hc, err
		}
		*d.dst = v
	}
	if h.Retries != nil {
		hc.Retries = *h.Retries
	}
	hc.Command = h.Command
	return hc, nil
}

// ImageRegistries are the core's form of regs.
func ImageRegistries(regs []abi.ImageRegistry) []boxlite.ImageRegistry {
	out := make([]boxlite.ImageRegistry, len(regs))
	for i, r := range regs {
		out[i] = boxlite.ImageRegistry{Host: r.Host, Transport: r.Transport, SkipVerify: r.SkipVerify, Search: r.Search,
			Username: r.Username, Password: r.Password, BearerToken: r.BearerToken, Mirrors: r.Mirrors}
	}
	return out
}

// advancedInfo is c's advanced options on the wire, as given.
func advancedInfo(c boxlite.BoxConfig) *abi.Advanced {
	if c.Capabilities == nil && c.Security == nil && c.HealthCheck == nil {
		return nil
	}
	a := &abi.Advanced{}
	if k := c.Capabilities; k != nil {
		a.Capabilities = &abi.Capabilities{Add: k.Add, Drop: k.Drop}
	}
	if s := c.Security; s != nil {
		a.Security = &abi.Security{JailerEnabled: &s.JailerEnabled, SeccompEnabled: &s.SeccompEnabled,
			MaxOpenFiles: s.MaxOpenFiles, MaxFileSize: s.MaxFileSize, MaxProcesses: s.MaxProcesses,
			MaxMemory: s.MaxMemory, MaxCPUTime: s.MaxCPUTime, NetworkEnabled: &s.NetworkEnabled, CloseFDs: &s.CloseFDs}
	}
	if h := c.HealthCheck; h != nil {
		i, t, sp, r := abi.SecondsOf(h.Interval), abi.SecondsOf(h.Timeout), abi.SecondsOf(h.StartPeriod), h.Retries
		a.HealthCheck = &abi.HealthCheck{IntervalSecs: &i, TimeoutSecs: &t, StartPeriodSecs: &sp, Retries: &r, Command: h.Command}
	}
	return a
}

// healthInfo is h on the wire.
func healthInfo(h boxlite.HealthStatus) abi.HealthStatus {
	w := abi.HealthStatus{State: h.State, Failures: h.Failures, LastError: h.LastError}
	if w.State == "" {
		w.State = boxlite.HealthNone
	}
	if !h.LastCheck.IsZero() {
		w.LastCheck = h.LastCheck.UTC().Format(time.RFC3339Nano)
	}
	return w
}
