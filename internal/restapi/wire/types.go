package wire

import "github.com/boxlite/boxlite/internal/abi"

// The JSON bodies of BoxLite's REST API (its openapi/box.openapi.yaml),
// field for field: these structs are the one description of the wire; the
// routes in routes.go name them and schema.go derives the served OpenAPI
// document from both. A `doc` tag is the field's description there; a
// `schema` tag adds keywords ("min=1,max=32", "enum=a|b", "format=date-time").
// Request bodies are decoded strictly: an unknown field is a 400.

// ServerConfig is GET /v1/config.
type ServerConfig struct {
	Defaults     ConfigDefaults     `json:"defaults"`
	Overrides    map[string]string  `json:"overrides"`
	Capabilities ConfigCapabilities `json:"capabilities"`
}

// ConfigDefaults are the values a create request gets for what it leaves out.
type ConfigDefaults struct {
	CPUs       int `json:"cpus" doc:"Default vCPU count"`
	MemoryMiB  int `json:"memory_mib" doc:"Default memory in MiB"`
	DiskSizeGB int `json:"disk_size_gb" doc:"Default disk size in GB"`
	AutoDelete int `json:"auto_delete" doc:"Default AutoDelete interval in seconds; 0 disables AutoDelete"`
}

// ConfigCapabilities are the server's limits and features.
type ConfigCapabilities struct {
	LinuxCapabilitiesEnabled bool    `json:"linux_capabilities_enabled"`
	MaxCPUs                  int     `json:"max_cpus"`
	MaxMemoryMiB             int     `json:"max_memory_mib"`
	MaxDiskSizeGB            int     `json:"max_disk_size_gb"`
	MaxBoxesPerPathPrefix    int     `json:"max_boxes_per_path_prefix" doc:"Maximum boxes per key"`
	MaxConcurrentExecutions  int     `json:"max_concurrent_executions" doc:"Maximum executions in flight per key"`
	FileTransferMaxBytes     int64   `json:"file_transfer_max_bytes"`
	ExecTimeoutMaxSeconds    float64 `json:"exec_timeout_max_seconds"`
	TTYEnabled               bool    `json:"tty_enabled"`
	StreamingEnabled         bool    `json:"streaming_enabled"`
	SnapshotsEnabled         bool    `json:"snapshots_enabled"`
	CloneEnabled             bool    `json:"clone_enabled"`
	ExportEnabled            bool    `json:"export_enabled"`
	IdempotencyKeyLifetime   string  `json:"idempotency_key_lifetime" doc:"ISO 8601 duration"`
}

// Principal is GET /v1/me.
type Principal struct {
	Sub           string   `json:"sub" doc:"The key's name"`
	PrincipalType string   `json:"principal_type" schema:"enum=user|service_account"`
	DisplayName   string   `json:"display_name,omitempty"`
	PathPrefix    *string  `json:"path_prefix" doc:"Always null: boxlite serve uses no routing slot"`
	Scopes        []string `json:"scopes"`
	ExpiresAt     *string  `json:"expires_at" schema:"format=date-time"`
}

// ErrorResponse is every error's body.
type ErrorResponse struct {
	Error ErrorModel `json:"error"`
}

// ErrorModel says what went wrong: Code is the machine's key, Type the
// PascalCase class, RequestID the X-Request-Id of the response.
type ErrorModel struct {
	Message   string `json:"message"`
	Type      string `json:"type"`
	Code      string `json:"code"`
	RequestID string `json:"request_id,omitempty"`
}

// Box is a box as the API shows it.
type Box struct {
	BoxID      string            `json:"box_id" schema:"min=1,max=128"`
	Name       *string           `json:"name"`
	Status     string            `json:"status" schema:"enum=configured|running|stopping|stopped|paused|failed|unknown"`
	CreatedAt  string            `json:"created_at" schema:"format=date-time"`
	UpdatedAt  string            `json:"updated_at" schema:"format=date-time"`
	PID        *int              `json:"pid" doc:"VMM process id, null unless running"`
	StartedAt  *string           `json:"started_at" schema:"format=date-time" doc:"when the box's VM became ready, null unless running or paused"`
	Image      string            `json:"image"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	Labels     map[string]string `json:"labels"`
	AutoStop   int               `json:"auto_stop" doc:"Always 0: boxlite serve does not stop idle boxes"`
	AutoDelete int               `json:"auto_delete"`
	AutoResume bool              `json:"auto_resume"`
}

// CreateBoxRequest is POST /boxes.
type CreateBoxRequest struct {
	Advanced   *AdvancedOptions  `json:"advanced,omitempty" doc:"BoxLite's REST create carries capabilities only (security options and health checks are the local SDKs')"`
	Name       string            `json:"name,omitempty" schema:"min=1,max=128,pattern=^[a-zA-Z0-9][a-zA-Z0-9._-]*$"`
	Image      string            `json:"image,omitempty" doc:"OCI image reference (default alpine:latest)"`
	RootfsPath string            `json:"rootfs_path,omitempty" doc:"Refused: a path would name the server's file system"`
	CPUs       *int              `json:"cpus,omitempty" schema:"min=1"`
	MemoryMiB  *int              `json:"memory_mib,omitempty" schema:"min=128"`
	DiskSizeGB *int              `json:"disk_size_gb,omitempty" schema:"min=1"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	User       string            `json:"user,omitempty"`
	Volumes    []VolumeSpec      `json:"volumes,omitempty" doc:"Managed volumes are BoxLite cloud's: a non-empty list is a 501"`
	Network    *NetworkSpec      `json:"network,omitempty"`
	Secrets    []SecretSpec      `json:"secrets,omitempty" doc:"Credentials the box uses without holding them: it sees each placeholder (env BOXLITE_SECRET_<NAME>), the server's network stack puts the value in HTTPS requests to the hosts; values are never returned"`
	Detach     *bool             `json:"detach,omitempty" doc:"Boxes made by the server are always detached; false is accepted and ignored"`
	TTY        bool              `json:"tty,omitempty" doc:"Not supported: true is a 501"`
	AutoStop   *int              `json:"auto_stop,omitempty" schema:"min=0" doc:"Only 0 (no AutoStop) is supported"`
	AutoDelete *int              `json:"auto_delete,omitempty" schema:"min=0" doc:"Only 0 (keep stopped boxes) is supported"`
	AutoResume *bool             `json:"auto_resume,omitempty"`
}

// AdvancedOptions are BoxLite's expert container options.
type AdvancedOptions struct {
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// Capabilities add and drop Linux capabilities.
type Capabilities struct {
	Add  []string `json:"add,omitempty" schema:"max=64" doc:"added to the box's default capability set (docker's without MKNOD): Linux names, with or without CAP_, any case; ALL is every one; an unknown name is a 400 naming it"`
	Drop []string `json:"drop,omitempty" schema:"max=64" doc:"removed after add"`
}

// VolumeSpec mounts a managed volume.
type VolumeSpec struct {
	ManagedVolume string `json:"managed_volume"`
	GuestPath     string `json:"guest_path"`
	ReadOnly      bool   `json:"read_only,omitempty"`
}

// NetworkSpec is a box's network, split or in the deprecated flat form.
type NetworkSpec struct {
	Outbound *DirectionSpec `json:"outbound,omitempty"`
	Inbound  *DirectionSpec `json:"inbound,omitempty"`
	Mode     string         `json:"mode,omitempty" schema:"enum=enabled|disabled" doc:"Deprecated: outbound.mode"`
	AllowNet []string       `json:"allow_net,omitempty" doc:"Deprecated: outbound.allow_net"`
}

// DirectionSpec is one direction's policy.
type DirectionSpec struct {
	Mode     string   `json:"mode" schema:"enum=enabled|disabled"`
	AllowNet []string `json:"allow_net,omitempty"`
}

// SecretSpec is a secret substitution rule.
type SecretSpec struct {
	Name        string   `json:"name"`
	Value       string   `json:"value"`
	Hosts       []string `json:"hosts,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
}

// TunnelDescriptor is POST /boxes/{id}/network/tunnel's answer (BoxLite's
// one field): CONNECT to URI's authority, its userinfo the tunnel's token.
type TunnelDescriptor struct {
	URI string `json:"uri" doc:"http(s)://TOKEN@HOST:PORT: open a connection to HOST:PORT and send CONNECT with this authority"`
}

// StopBoxRequest is POST /boxes/{id}/stop's optional body.
type StopBoxRequest struct {
	TimeoutSeconds *abi.Seconds `json:"timeout_seconds,omitempty" schema:"min=0"`
}

// ListBoxesResponse is GET /boxes.
type ListBoxesResponse struct {
	Boxes         []Box   `json:"boxes"`
	NextPageToken *string `json:"next_page_token"`
}

// Snapshot is a box's disk snapshot.
type Snapshot struct {
	ID                 string `json:"id"`
	BoxID              string `json:"box_id"`
	Name               string `json:"name"`
	CreatedAt          int64  `json:"created_at" doc:"Unix seconds"`
	GuestDiskBytes     int64  `json:"guest_disk_bytes"`
	ContainerDiskBytes int64  `json:"container_disk_bytes"`
	SizeBytes          int64  `json:"size_bytes"`
	// boxlite's: the box's memory is kept too (memory snapshots).
	Memory      bool  `json:"memory,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// CreateSnapshotRequest names a new snapshot.
type CreateSnapshotRequest struct {
	Name string `json:"name" schema:"min=1,max=128"`
	// boxlite's: keep the running or paused box's memory too.
	Memory bool `json:"memory,omitempty"`
}

// ListSnapshotsResponse is GET /boxes/{id}/snapshots.
type ListSnapshotsResponse struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// CloneBoxRequest names a clone.
type CloneBoxRequest struct {
	Name string `json:"name,omitempty" schema:"max=128"`
}

// PauseResponse is POST /boxes/{id}/pause (boxlite's): the saved state.
type PauseResponse struct {
	SavedAt    string  `json:"saved_at" doc:"RFC 3339"`
	StateBytes int64   `json:"state_bytes" doc:"host bytes of the saved memory and devices"`
	SaveMs     float64 `json:"save_ms" doc:"VM stopped to state synced"`
}

// ForkBoxRequest is POST /boxes/{id}/fork (boxlite's).
type ForkBoxRequest struct {
	Count int      `json:"count,omitempty" schema:"min=1,max=64" doc:"default 1"`
	Names []string `json:"names,omitempty" doc:"at most count; the first forks get them"`
}

// ForkBoxResponse is the forks, running.
type ForkBoxResponse struct {
	Boxes []Box `json:"boxes"`
}

// ExportBoxRequest has no fields yet.
type ExportBoxRequest struct{}

// ExecRequest is POST /boxes/{id}/exec.
type ExecRequest struct {
	Command        string            `json:"command"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds *abi.Seconds      `json:"timeout_seconds,omitempty" schema:"min=0"`
	WorkingDir     string            `json:"working_dir,omitempty"`
	User           string            `json:"user,omitempty"`
	TTY            bool              `json:"tty,omitempty"`
}

// ExecResponse names the execution an exec started.
type ExecResponse struct {
	ExecutionID string `json:"execution_id"`
}

// ExecutionInfo is an execution's state.
type ExecutionInfo struct {
	ExecutionID  string  `json:"execution_id"`
	Status       string  `json:"status" schema:"enum=running|completed|killed|timed_out|lost"`
	ExitCode     *int    `json:"exit_code"`
	StartedAt    string  `json:"started_at" schema:"format=date-time"`
	DurationMs   *int64  `json:"duration_ms"`
	ErrorMessage *string `json:"error_message"`
}

// SignalRequest sends a signal.
type SignalRequest struct {
	Signal int `json:"signal"`
	// ProcessGroup is boxlite's extension: BoxLite's servers do not know it.
	ProcessGroup bool `json:"process_group,omitempty" doc:"boxlite extension: signal the process's group (the process and what it started), as an interrupt of a shell's command needs"`
}

// ResizeRequest resizes a terminal.
type ResizeRequest struct {
	Cols int `json:"cols" schema:"min=1"`
	Rows int `json:"rows" schema:"min=1"`
}

// RuntimeMetrics are the runtime's counters.
type RuntimeMetrics struct {
	BoxesCreatedTotal     uint64 `json:"boxes_created_total"`
	BoxesFailedTotal      uint64 `json:"boxes_failed_total"`
	BoxesStoppedTotal     uint64 `json:"boxes_stopped_total"`
	NumRunningBoxes       uint64 `json:"num_running_boxes"`
	TotalCommandsExecuted uint64 `json:"total_commands_executed"`
	TotalExecErrors       uint64 `json:"total_exec_errors"`
}

// BoxMetrics are a box's counters and samples.
type BoxMetrics struct {
	CommandsExecutedTotal uint64      `json:"commands_executed_total"`
	ExecErrorsTotal       uint64      `json:"exec_errors_total"`
	BytesSentTotal        uint64      `json:"bytes_sent_total"`
	BytesReceivedTotal    uint64      `json:"bytes_received_total"`
	CPUPercent            *float64    `json:"cpu_percent"`
	MemoryBytes           *uint64     `json:"memory_bytes"`
	NetworkBytesSent      *uint64     `json:"network_bytes_sent"`
	NetworkBytesReceived  *uint64     `json:"network_bytes_received"`
	NetworkTCPConnections *uint64     `json:"network_tcp_connections"`
	NetworkTCPErrors      *uint64     `json:"network_tcp_errors"`
	BootTiming            *BootTiming `json:"boot_timing"`
}

// BootTiming is where a box's last start went, in milliseconds.
type BootTiming struct {
	TotalCreateMs     *int64 `json:"total_create_ms"`
	GuestBootMs       *int64 `json:"guest_boot_ms"`
	FilesystemSetupMs *int64 `json:"filesystem_setup_ms"`
	ImagePrepareMs    *int64 `json:"image_prepare_ms"`
	GuestRootfsMs     *int64 `json:"guest_rootfs_ms"`
	BoxConfigMs       *int64 `json:"box_config_ms"`
	BoxSpawnMs        *int64 `json:"box_spawn_ms"`
	ContainerInitMs   *int64 `json:"container_init_ms"`
}

// ImageInfo is an image in the server's store.
type ImageInfo struct {
	Reference  string `json:"reference"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	ID         string `json:"id" doc:"Manifest digest"`
	CachedAt   string `json:"cached_at" schema:"format=date-time"`
	SizeBytes  *int64 `json:"size_bytes"`
}

// PullImageRequest is POST /images/pull.
type PullImageRequest struct {
	Reference string `json:"reference"`
}

// ListImagesResponse is GET /images.
type ListImagesResponse struct {
	Images        []ImageInfo `json:"images"`
	NextPageToken *string     `json:"next_page_token"`
}
