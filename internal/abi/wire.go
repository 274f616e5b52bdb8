package abi

// The JSON objects the C ABI takes and returns (include/boxlite.h documents
// each where its function is). Unknown fields are errors; absent optional
// fields (pointers, empty values) take the defaults in limits.go. Every
// quantity names its unit: _mib, _gb, _bytes, _secs, _ms.

// BoxOptions create a box (boxlite_box_create).
type BoxOptions struct {
	Image           string            `json:"image"`
	Name            string            `json:"name,omitempty"`
	MemoryMiB       *int              `json:"memory_mib,omitempty"`        // default DefaultMemoryMiB
	CPUs            *int              `json:"cpus,omitempty"`              // default DefaultCPUs
	DiskSizeGB      *int              `json:"disk_size_gb,omitempty"`      // default DefaultDiskSizeGB
	Env             map[string]string `json:"env,omitempty"`               // added to the image's
	WorkingDir      string            `json:"working_dir,omitempty"`       // default: the image's
	User            string            `json:"user,omitempty"`              // default: the image's
	BootTimeoutSecs *Seconds          `json:"boot_timeout_secs,omitempty"` // default DefaultBootTimeout; must be > 0
	AutoRemove      *bool             `json:"auto_remove,omitempty"`       // default DefaultAutoRemove
	Detach          bool              `json:"detach,omitempty"`
	Entrypoint      []string          `json:"entrypoint,omitempty"` // default: the image's
	Cmd             []string          `json:"cmd,omitempty"`        // default: the image's
	Network         *Network          `json:"network,omitempty"`    // default: enabled, no allow-list
	Ports           []Port            `json:"ports,omitempty"`
	Volumes         []Volume          `json:"volumes,omitempty"`
	Hostname        string            `json:"hostname,omitempty"` // default DefaultHostname
	Prestart        []string          `json:"prestart,omitempty"`
}

// Network is a box's network: Mode "enabled" (default) or "disabled", and
// the destinations it may reach (empty: anywhere the host can).
type Network struct {
	Mode     string   `json:"mode,omitempty"`
	AllowNet []string `json:"allow_net,omitempty"`
}

// Port publishes a guest port on the host.
type Port struct {
	Protocol  string `json:"protocol,omitempty"` // "tcp" (default) or "udp"
	HostIP    string `json:"host_ip,omitempty"`  // default 127.0.0.1
	HostPort  int    `json:"host_port"`          // 0: any free port
	GuestPort int    `json:"guest_port"`
}

// Volume mounts a host directory or file in the box. SizeLimitBytes bounds
// what the box may store in a read-write directory volume (0: no limit; a
// watcher, see docs/SECURITY.md).
type Volume struct {
	HostPath       string `json:"host_path"`
	GuestPath      string `json:"guest_path"`
	ReadOnly       bool   `json:"read_only,omitempty"`
	SizeLimitBytes int64  `json:"size_limit_bytes,omitempty"`
}

// BoxInfo describes a box (boxlite_box_info, boxlite_runtime_list).
type BoxInfo struct {
	ID            string          `json:"id"`
	Name          string          `json:"name,omitempty"`
	Image         string          `json:"image"`
	State         string          `json:"state"`
	CreatedAtUnix int64           `json:"created_at_unix"` // seconds
	CreatedAt     string          `json:"created_at"`      // RFC 3339, the same instant
	Config        BoxConfig       `json:"config"`
	Dir           string          `json:"dir"`
	LastExit      string          `json:"last_exit,omitempty"` // why the box last stopped
	Faulted       bool            `json:"faulted,omitempty"`   // its last run ended in a fault
	Runtime       *BoxRuntimeInfo `json:"runtime,omitempty"`   // while it runs
}

// BoxConfig is what a box was created with, defaults applied.
type BoxConfig struct {
	Image           string            `json:"image"`
	Name            string            `json:"name,omitempty"`
	MemoryMiB       int               `json:"memory_mib"`
	CPUs            int               `json:"cpus"`
	DiskSizeGB      int               `json:"disk_size_gb"`
	Env             map[string]string `json:"env,omitempty"`
	WorkingDir      string            `json:"working_dir,omitempty"`
	User            string            `json:"user,omitempty"`
	BootTimeoutSecs Seconds           `json:"boot_timeout_secs"`
	AutoRemove      bool              `json:"auto_remove"`
	Detach          bool              `json:"detach"`
	Entrypoint      []string          `json:"entrypoint,omitempty"`
	Cmd             []string          `json:"cmd,omitempty"`
	Network         Network           `json:"network"`
	Ports           []Port            `json:"ports,omitempty"`
	Volumes         []Volume          `json:"volumes,omitempty"`
	KernelArgs      []string          `json:"kernel_args,omitempty"`
	Hostname        string            `json:"hostname"`
	Prestart        []string          `json:"prestart,omitempty"`
}

// BoxRuntimeInfo is what a running box reports about its VM.
type BoxRuntimeInfo struct {
	Accel         string       `json:"accel"`
	AccelReason   string       `json:"accel_reason"`
	Kernel        string       `json:"kernel"`
	BootMs        float64      `json:"boot_ms"`         // host: VMM start to agent ready
	GuestKernelMs float64      `json:"guest_kernel_ms"` // guest clock: boot to agent start
	GuestReadyMs  float64      `json:"guest_ready_ms"`  // guest clock: boot to ready
	ShimPid       int          `json:"shim_pid"`
	VMMPid        int          `json:"vmm_pid"`
	Start         string       `json:"start,omitempty"` // "boot", "template", "new-template"
	StartNote     string       `json:"start_note,omitempty"`
	Warnings      []string     `json:"warnings,omitempty"`
	Network       *NetworkInfo `json:"network,omitempty"` // nil when disabled
}

// NetworkInfo is a running box's network, its published ports as bound.
type NetworkInfo struct {
	GuestIP   string        `json:"guest_ip"`
	GatewayIP string        `json:"gateway_ip"`
	AllowNet  []string      `json:"allow_net,omitempty"`
	Ports     []Port        `json:"ports,omitempty"`
	Stats     *NetworkStats `json:"stats,omitempty"`
}

// NetworkStats counts what a box's network did.
type NetworkStats struct {
	BytesToGuest   uint64 `json:"bytes_to_guest"`
	BytesFromGuest uint64 `json:"bytes_from_guest"`
	TCPConns       uint64 `json:"tcp_connections"`
	UDPFlows       uint64 `json:"udp_flows"`
}

// Command runs a process (boxlite_box_exec, boxlite_box_run).
type Command struct {
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	User        string            `json:"user,omitempty"`
	TimeoutSecs Seconds           `json:"timeout_secs,omitempty"` // 0: none
	Stdin       bool              `json:"stdin,omitempty"`
	Tty         bool              `json:"tty,omitempty"`
	Rows        int               `json:"rows,omitempty"`               // with tty; default DefaultRows
	Cols        int               `json:"cols,omitempty"`               // with tty; default DefaultCols
	OutputLimit int64             `json:"output_limit_bytes,omitempty"` // 0: the runtime's
}

// CopyOptions control a copy in or out (boxlite_box_copy_in/out).
type CopyOptions struct {
	Overwrite      *bool    `json:"overwrite,omitempty"`       // default true
	FollowSymlinks bool     `json:"follow_symlinks,omitempty"` // default false
	IncludeParent  *bool    `json:"include_parent,omitempty"`  // default true
	Recursive      *bool    `json:"recursive,omitempty"`       // default true
	MaxBytes       int64    `json:"max_bytes,omitempty"`       // 0: the default cap; -1: none
	MaxEntries     int64    `json:"max_entries,omitempty"`     // 0: the default cap; -1: none
	TimeoutSecs    *Seconds `json:"timeout_secs,omitempty"`    // default: none; must be > 0
}

// SessionOptions start a persistent session (boxlite_session_new).
type SessionOptions struct {
	Python      string            `json:"python,omitempty"` // python sessions: the interpreter
	Shell       string            `json:"shell,omitempty"`  // shell sessions: the shell
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	User        string            `json:"user,omitempty"`
	GraceSecs   *Seconds          `json:"grace_secs,omitempty"`         // must be > 0
	OutputLimit int64             `json:"output_limit_bytes,omitempty"` // 0: the runtime's
}

// ShellCommand runs a command on a shell session (boxlite_session_exec).
type ShellCommand struct {
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env,omitempty"`
	TimeoutSecs Seconds           `json:"timeout_secs,omitempty"` // 0: none
	OutputLimit int64             `json:"output_limit_bytes,omitempty"`
}

// CellResult is a finished Python cell.
type CellResult struct {
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	Value           *string    `json:"value"` // repr of the last expression, if any
	Error           *CellError `json:"error"`
	ExitCode        int        `json:"exit_code"`
	TimedOut        bool       `json:"timed_out"`
	Restarted       bool       `json:"restarted"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
}

// CellError is the exception a cell raised.
type CellError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// SessionInfo describes a session (boxlite_session_info).
type SessionInfo struct {
	Kind     string `json:"kind"` // "python" or "shell"
	Pid      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	Python   string `json:"python,omitempty"` // the interpreter's version
}

// ImageInfo describes an image in the store (boxlite_image_list, _load).
type ImageInfo struct {
	Name      string       `json:"name"`   // canonical, e.g. "docker.io/library/alpine:latest"
	Digest    string       `json:"digest"` // the manifest's, "sha256:..."
	SizeBytes int64        `json:"size_bytes"`
	Layers    []ImageLayer `json:"layers"` // bottom first
	Config    ImageConfig  `json:"config"`
}

// ImageLayer is one layer of an image.
type ImageLayer struct {
	DiffID    string `json:"diff_id"`    // the uncompressed tar's digest
	SizeBytes int64  `json:"size_bytes"` // the blob as stored
}

// ImageConfig is how an image runs by default.
type ImageConfig struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// CellOptions run a Python cell (boxlite_session_run, _run_start).
type CellOptions struct {
	TimeoutSecs Seconds `json:"timeout_secs,omitempty"` // 0: none
}
