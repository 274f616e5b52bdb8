package abi

// Advanced is BoxLite 0.10's AdvancedBoxOptions (docs/security-options.md).
type Advanced struct {
	Capabilities *Capabilities `json:"capabilities,omitempty" doc:"added to and dropped from the default capability set of box processes (docker's default set without MKNOD)"`
	Security     *Security     `json:"security,omitempty" doc:"isolation settings; absent: BoxLite's standard preset"`
	HealthCheck  *HealthCheck  `json:"health_check,omitempty" doc:"a command the box's shim runs in the box now and then; info's health_status reports it"`
}

// Capabilities change the capability set of box processes (BoxLite's
// ContainerCapabilities).
type Capabilities struct {
	Add  []string `json:"add,omitempty" doc:"Linux capability names (NET_ADMIN or CAP_NET_ADMIN, any case; ALL is every one); an unknown one is invalid_argument naming it"`
	Drop []string `json:"drop,omitempty" doc:"removed after add (a name in both is dropped)"`
}

// Security is BoxLite's SecurityOptions; an absent field takes the
// standard preset's value.
type Security struct {
	JailerEnabled  *bool   `json:"jailer_enabled,omitempty" doc:"the VMM runs in the host jail (namespaces, its own uid, cgroup, seccomp, no_new_privs): default true"`
	SeccompEnabled *bool   `json:"seccomp_enabled,omitempty" doc:"box processes run under the box's seccomp filter: default true"`
	MaxOpenFiles   *uint64 `json:"max_open_files,omitempty" doc:"RLIMIT_NOFILE of every box process: default none"`
	MaxFileSize    *uint64 `json:"max_file_size_bytes,omitempty" doc:"BoxLite's max_file_size: RLIMIT_FSIZE of every box process: default none"`
	MaxProcesses   *uint64 `json:"max_processes,omitempty" doc:"RLIMIT_NPROC of every box process (Linux does not hold root to it): default none"`
	MaxMemory      *uint64 `json:"max_memory_bytes,omitempty" doc:"BoxLite's max_memory: RLIMIT_AS of every box process: default none"`
	MaxCPUTime     *uint64 `json:"max_cpu_time_secs,omitempty" doc:"BoxLite's max_cpu_time: RLIMIT_CPU of every box process: default none"`
	NetworkEnabled *bool   `json:"network_enabled,omitempty" doc:"BoxLite's macOS-only setting: default true; false is unsupported (use network mode disabled)"`
	CloseFDs       *bool   `json:"close_fds,omitempty" doc:"default true; the shim and VMM always start with only the descriptors they use"`
}

// HealthCheck is BoxLite's HealthCheckOptions.
type HealthCheck struct {
	IntervalSecs    *Seconds `json:"interval_secs,omitempty" doc:"between checks: default {DEFAULT_HEALTH_INTERVAL_SECS}"`
	TimeoutSecs     *Seconds `json:"timeout_secs,omitempty" doc:"a check that has not exited 0 by then fails: default {DEFAULT_HEALTH_TIMEOUT_SECS}"`
	Retries         *int     `json:"retries,omitempty" doc:"failures in a row that make the box unhealthy: default {DEFAULT_HEALTH_RETRIES}"`
	StartPeriodSecs *Seconds `json:"start_period_secs,omitempty" doc:"after the box is ready, failures do not count for this long: default {DEFAULT_HEALTH_START_PERIOD_SECS}"`
	Command         []string `json:"command,omitempty" doc:"what a check runs (root, in /, a default PATH): default [\"true\"], which passes when the agent can start a process in the box"`
}

// HealthStatus is a box's health (BoxLite's HealthStatus).
type HealthStatus struct {
	State     string `json:"state" enum:"none,starting,healthy,unhealthy" doc:"none: no health check, or not running"`
	Failures  int    `json:"failures" doc:"failed checks in a row that counted"`
	LastCheck string `json:"last_check,omitempty" doc:"RFC 3339: when the last check ended"`
	LastError string `json:"last_error,omitempty" doc:"why the last check failed"`
}
