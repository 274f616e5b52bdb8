package abi

// The JSON objects the C ABI takes and returns (include/boxlite.h documents
// each where its function is). Unknown fields are errors; absent optional
// fields (pointers, empty values) take the defaults in limits.go. Every
// quantity names its unit: _mib, _gb, _bytes, _secs, _ms.

// Every field of the structs below carries its documentation in a doc tag
// (and the strings it may be in an enum tag): internal/abigen writes the
// header's comment blocks and index.d.ts's types from them. A doc starting
// "required" marks a field a caller must give; {NAME} stands for the
// Constant of that name.

// BoxOptions create a box (boxlite_box_create).
type BoxOptions struct {
	Image           string            `json:"image" doc:"required: an image in the store or a registry, e.g. \"alpine:latest\""`
	Name            string            `json:"name,omitempty" doc:"1-64 of [a-zA-Z0-9_.-], starting with a letter or digit"`
	MemoryMiB       *int              `json:"memory_mib,omitempty" doc:"guest memory: default {DEFAULT_MEMORY_MIB}, {MIN_MEMORY_MIB}..{MAX_MEMORY_MIB}"`
	CPUs            *int              `json:"cpus,omitempty" doc:"virtual CPUs: default {DEFAULT_CPUS}, {MIN_CPUS}..{MAX_CPUS}"`
	DiskSizeGB      *int              `json:"disk_size_gb,omitempty" doc:"writable disk (sparse): default {DEFAULT_DISK_SIZE_GB}, {MIN_DISK_SIZE_GB}..{MAX_DISK_SIZE_GB}"`
	Env             map[string]string `json:"env,omitempty" doc:"added to the image's"`
	WorkingDir      string            `json:"working_dir,omitempty" doc:"default: the image's"`
	User            string            `json:"user,omitempty" doc:"name, uid or uid:gid; default: the image's"`
	BootTimeoutSecs *Seconds          `json:"boot_timeout_secs,omitempty" doc:"VM start to agent ready: default {DEFAULT_BOOT_TIMEOUT_SECS}, more than 0, at most {MAX_BOOT_TIMEOUT_SECS}"`
	AutoRemove      *bool             `json:"auto_remove,omitempty" doc:"remove the box when it stops (never while only configured): default {DEFAULT_AUTO_REMOVE}"`
	Detach          bool              `json:"detach,omitempty" doc:"the box outlives the process that starts it: closing the runtime leaves it running, any process reattaches by id or name; default false"`
	Entrypoint      []string          `json:"entrypoint,omitempty" doc:"overrides the image's (and drops its cmd, as docker's --entrypoint does): what an exec with no argv runs"`
	Cmd             []string          `json:"cmd,omitempty" doc:"overrides the image's"`
	Network         *Network          `json:"network,omitempty" doc:"default: enabled, no allow-list"`
	Ports           []Port            `json:"ports,omitempty" doc:"box ports published on the host; a host port in use is already_exists"`
	Volumes         []Volume          `json:"volumes,omitempty" doc:"host folders or files in the box, over virtio-fs"`
	Hostname        string            `json:"hostname,omitempty" doc:"a DNS label: default \"boxlite\""`
	AutoPauseSecs   *Seconds          `json:"auto_pause_secs,omitempty" doc:"pause the box (with its memory, as boxlite_box_pause) after this long with no exec, copy or session call: a stream that stays open holds it awake, except a detachable exec's (a session's interpreter, an interactive shell) that sent nothing either way for that long; the next call resumes it. 0 (default): never. At least 1, at most {MAX_AUTO_PAUSE_SECS}; not with volumes"`
	Prestart        []string          `json:"prestart,omitempty" doc:"sessions a box started from a template finds started: \"python\", \"shell\" or \"shell:/ABSOLUTE/PATH\"; its first session of that kind with default options takes over the one the template VM started"`
	Secrets         []Secret          `json:"secrets,omitempty" doc:"credentials the box uses without holding them: it sees each one's placeholder (env BOXLITE_SECRET_<NAME>), the host puts the value in HTTPS requests to its hosts; at most {MAX_SECRETS}, see docs/secrets.md"`
	Advanced        *Advanced         `json:"advanced,omitempty" doc:"BoxLite's AdvancedBoxOptions: capabilities, security, health_check (docs/security-options.md); a box with capabilities or security boots (no template, no warm pool)"`
}

// Secret is a credential that never enters the box.
type Secret struct {
	Name        string   `json:"name" doc:"required: names the env variable BOXLITE_SECRET_<NAME> (upper case)"`
	Value       string   `json:"value" doc:"required: the real value, 1 to {MAX_SECRET_VALUE_BYTES} bytes without line breaks; never in box info"`
	Hosts       []string `json:"hosts" doc:"required: host names or *.wildcards, optionally :port (default 443), where HTTPS requests get the value; each is reachable on that port even when allow_net does not list it"`
	Placeholder string   `json:"placeholder,omitempty" doc:"what the box sees: default \"<BOXLITE_SECRET:NAME>\""`
}

// SecretInfo is a secret as box info shows it: never its value.
type SecretInfo struct {
	Name        string   `json:"name"`
	Hosts       []string `json:"hosts"`
	Placeholder string   `json:"placeholder"`
}

// Network is a box's network: BoxLite's split form (outbound, inbound) or
// the flat one (mode, allow_net: the outbound's), not both.
type Network struct {
	Mode     string            `json:"mode,omitempty" enum:"enabled,disabled" doc:"the flat form's outbound mode: enabled (default: NAT to the host's network) or disabled (no NIC, only lo)"`
	AllowNet []string          `json:"allow_net,omitempty" doc:"the flat form's: where an enabled box may connect: host names, *.wildcards, IPv4 addresses or CIDRs, each optionally with :port; empty: anywhere. The host's 127.0.0.1 is host.boxlite.internal in the box (with a list, only when listed)"`
	Outbound *NetworkDirection `json:"outbound,omitempty" doc:"BoxLite's split form: mode and allow_net as the flat form's"`
	Inbound  *NetworkDirection `json:"inbound,omitempty" doc:"BoxLite's split form: the inbound mode (kept and reported: a local box has no public side); a non-empty allow_net is unsupported, as in BoxLite"`
}

// NetworkDirection is one direction of a box's network policy.
type NetworkDirection struct {
	Mode     string   `json:"mode" enum:"enabled,disabled" doc:"required"`
	AllowNet []string `json:"allow_net,omitempty" doc:"outbound: where the box may connect, as the flat allow_net; inbound: must be empty"`
}

// BoxNetwork is a box's network policy as BoxLite's info reports it.
type BoxNetwork struct {
	Outbound       NetworkDirection `json:"outbound"`
	Inbound        NetworkDirection `json:"inbound"`
	Mode           string           `json:"mode" doc:"the outbound mode (BoxLite's deprecated mirror)"`
	AllowNet       []string         `json:"allow_net" doc:"the outbound allow_net (BoxLite's deprecated mirror)"`
	PublishedPorts []Port           `json:"published_ports" doc:"as bound while the box runs, else as asked"`
}

// Port publishes a guest port on the host.
type Port struct {
	Protocol  string `json:"protocol,omitempty" enum:"tcp,udp" doc:"default tcp"`
	HostIP    string `json:"host_ip,omitempty" doc:"the host address to bind: default 127.0.0.1"`
	HostPort  int    `json:"host_port" doc:"0 (or absent) picks a free port; info shows the one bound"`
	GuestPort int    `json:"guest_port" doc:"required: the port in the box"`
}

// Volume mounts a host directory or file in the box.
type Volume struct {
	HostPath       string `json:"host_path" doc:"required: a host folder or file"`
	GuestPath      string `json:"guest_path" doc:"required: where the box sees it"`
	ReadOnly       bool   `json:"read_only,omitempty" doc:"default false"`
	SizeLimitBytes int64  `json:"size_limit_bytes,omitempty" doc:"what the box may store in a read-write folder (a watcher, see docs/SECURITY.md); 0: no limit"`
}

// BoxInfo describes a box (boxlite_box_info, boxlite_runtime_list).
type BoxInfo struct {
	ID            string          `json:"id" doc:"12 hex digits"`
	Name          string          `json:"name,omitempty"`
	Image         string          `json:"image"`
	State         string          `json:"state" enum:"configured,starting,running,paused,stopping,stopped,removed"`
	CreatedAtUnix int64           `json:"created_at_unix" doc:"seconds"`
	CreatedAt     string          `json:"created_at" doc:"RFC 3339, the same instant"`
	Config        BoxConfig       `json:"config" doc:"the create options with defaults applied"`
	Dir           string          `json:"dir" doc:"the box's directory"`
	LastExit      string          `json:"last_exit,omitempty" doc:"why the box last stopped"`
	Faulted       bool            `json:"faulted,omitempty" doc:"its last run ended in a fault (a crashed VMM, a protocol violation): exec does not start it again, start does"`
	Runtime       *BoxRuntimeInfo `json:"runtime,omitempty" doc:"only while it runs"`
	Network       BoxNetwork      `json:"network" doc:"the network policy now (update_outbound changes it)"`
	HealthStatus  HealthStatus    `json:"health_status" doc:"its health check's state (BoxLite's)"`
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
	Ports           []Port            `json:"ports,omitempty" doc:"as asked (host_port 0: any); the runtime's network shows them bound"`
	Volumes         []Volume          `json:"volumes,omitempty"`
	KernelArgs      []string          `json:"kernel_args,omitempty"`
	Hostname        string            `json:"hostname"`
	Prestart        []string          `json:"prestart,omitempty"`
	AutoPauseSecs   Seconds           `json:"auto_pause_secs,omitempty" doc:"0: never"`
	Secrets         []SecretInfo      `json:"secrets,omitempty" doc:"names, hosts and placeholders: never the values"`
	Advanced        *Advanced         `json:"advanced,omitempty" doc:"as given (absent fields are the defaults)"`
}

// BoxRuntimeInfo is what a running box reports about its VM.
type BoxRuntimeInfo struct {
	Accel         string       `json:"accel" doc:"the VMM's acceleration: kvm or tcg"`
	AccelReason   string       `json:"accel_reason" doc:"why that acceleration"`
	Kernel        string       `json:"kernel" doc:"the guest kernel's path"`
	BootMs        float64      `json:"boot_ms" doc:"host clock: VMM start to agent ready"`
	GuestKernelMs float64      `json:"guest_kernel_ms" doc:"guest clock: boot to agent start"`
	GuestReadyMs  float64      `json:"guest_ready_ms" doc:"guest clock: boot to ready"`
	ShimPid       int          `json:"shim_pid"`
	VMMPid        int          `json:"vmm_pid"`
	Start         string       `json:"start,omitempty" enum:"boot,template,new-template" doc:"how the VM came up: a boot, a template (a warm start), or a boot that made its shape's template first"`
	StartNote     string       `json:"start_note,omitempty" doc:"why a box that could have started from a template booted"`
	Warnings      []string     `json:"warnings,omitempty" doc:"what weakens this box's isolation (TCG, a missing VMM confinement layer); see docs/SECURITY.md"`
	Network       *NetworkInfo `json:"network,omitempty" doc:"absent when disabled"`
	StartedAt     string       `json:"started_at,omitempty" doc:"RFC 3339: when the VM became ready (BoxLite's started_at)"`
	LastActivity  string       `json:"last_activity_at,omitempty" doc:"RFC 3339: the later of started_at and the last exec, copy or session call this process saw"`
}

// NetworkInfo is a running box's network, its published ports as bound.
type NetworkInfo struct {
	GuestIP   string        `json:"guest_ip"`
	GatewayIP string        `json:"gateway_ip"`
	AllowNet  []string      `json:"allow_net,omitempty"`
	Ports     []Port        `json:"ports,omitempty" doc:"as bound, host ports picked"`
	Stats     *NetworkStats `json:"stats,omitempty"`
}

// NetworkStats counts what a box's network did.
type NetworkStats struct {
	BytesToGuest   uint64 `json:"bytes_to_guest"`
	BytesFromGuest uint64 `json:"bytes_from_guest"`
	TCPConns       uint64 `json:"tcp_connections" doc:"opened, not open"`
	TCPErrors      uint64 `json:"tcp_errors" doc:"TCP connections the host could not open"`
	UDPFlows       uint64 `json:"udp_flows"`
}

// Command runs a process (boxlite_box_exec, boxlite_box_run).
type Command struct {
	Argv        []string          `json:"argv" doc:"required: never joined into a shell string; [] runs the box's entrypoint and cmd"`
	Env         map[string]string `json:"env,omitempty" doc:"added to the box's"`
	Cwd         string            `json:"cwd,omitempty" doc:"default: the box's working directory"`
	User        string            `json:"user,omitempty" doc:"name, uid or uid:gid; default: the box's"`
	TimeoutSecs Seconds           `json:"timeout_secs,omitempty" doc:"kills the process after that long (exit.timed_out); 0: none"`
	Stdin       bool              `json:"stdin,omitempty" doc:"keep stdin open for boxlite_execution_write; default false"`
	Tty         bool              `json:"tty,omitempty" doc:"run on a pseudo-terminal (see below); default false"`
	Rows        int               `json:"rows,omitempty" doc:"with tty: the terminal's rows, default {DEFAULT_ROWS}"`
	Cols        int               `json:"cols,omitempty" doc:"with tty: the terminal's columns, default {DEFAULT_COLS}"`
	OutputLimit int64             `json:"output_limit_bytes,omitempty" doc:"boxlite_box_run only: output kept per stream; default: the runtime's"`
}

// CopyOptions control a copy in or out (boxlite_box_copy_in/out).
type CopyOptions struct {
	Overwrite      *bool    `json:"overwrite,omitempty" doc:"replace an existing destination: default true"`
	FollowSymlinks bool     `json:"follow_symlinks,omitempty" doc:"follow a symlink named as the source: default false"`
	IncludeParent  *bool    `json:"include_parent,omitempty" doc:"copy a directory itself (false: its contents): default true"`
	Recursive      *bool    `json:"recursive,omitempty" doc:"false refuses a directory: default true"`
	Layout         string   `json:"layout,omitempty" doc:"where a directory lands: \"docker\" (default: a destination that does not exist becomes the copy, as docker cp) or \"boxlite\" (always inside the destination under its own name, the destination made if missing, as BoxLite 0.10; the Python and Node SDKs ask for it)"`
	MaxBytes       int64    `json:"max_bytes,omitempty" doc:"a cap on file data, limit past it; 0: the default ({DEFAULT_COPY_OUT_MAX_BYTES} for copy_out, none for copy_in); -1: none"`
	MaxEntries     int64    `json:"max_entries,omitempty" doc:"a cap on entries, limit past it; 0: the default ({DEFAULT_COPY_OUT_MAX_ENTRIES} for copy_out, none for copy_in); -1: none"`
	TimeoutSecs    *Seconds `json:"timeout_secs,omitempty" doc:"more than 0 (timeout past it); default: none"`
}

// SocketAddress is where a tunnel forwarder listens (boxlite_box_tunnel_forward),
// and what boxlite_forwarder_local_addr returns: BoxLite's SocketAddress.
type SocketAddress struct {
	Type string `json:"type" enum:"tcp,unix" doc:"required: tcp or unix"`
	Host string `json:"host,omitempty" doc:"tcp: a numeric IP address (a name is invalid_argument): default \"127.0.0.1\""`
	Port int    `json:"port,omitempty" doc:"tcp: 0 to 65535; 0 picks a free port (local_addr says which)"`
	Path string `json:"path,omitempty" doc:"unix: an absolute path; the socket file must not exist, and is removed on close"`
}

// SessionOptions start a persistent session (boxlite_session_new).
type SessionOptions struct {
	Python      string            `json:"python,omitempty" doc:"python sessions: the interpreter; default: the first of /usr/local/bin/python3, python3, python in the box"`
	Shell       string            `json:"shell,omitempty" doc:"shell sessions: the shell; default \"/bin/sh\""`
	Env         map[string]string `json:"env,omitempty" doc:"added to the box's"`
	Cwd         string            `json:"cwd,omitempty" doc:"default: the box's working directory"`
	User        string            `json:"user,omitempty" doc:"name, uid or uid:gid; default: the box's"`
	GraceSecs   *Seconds          `json:"grace_secs,omitempty" doc:"how long an interrupted cell or command has to stop before its interpreter or shell is killed and restarted: default {DEFAULT_SESSION_GRACE_SECS}, more than 0"`
	OutputLimit int64             `json:"output_limit_bytes,omitempty" doc:"output kept per stream of a result; default: the runtime's"`
	Name        string            `json:"name,omitempty" doc:"1-48 of [A-Za-z0-9_-]: the session's process outlives its client, and a later session of that kind and name in the box (another process, after a pause, in a fork) takes it over with its state; local runtimes only"`
}

// SnapshotOptions are a snapshot's (boxlite_box_snapshot_create_with).
type SnapshotOptions struct {
	Memory bool `json:"memory,omitempty" doc:"keep the box's memory and devices too (a running or paused box): restoring the snapshot brings the box back paused, its processes as they were"`
}

// ShellCommand runs a command on a shell session (boxlite_session_exec).
type ShellCommand struct {
	Argv        []string          `json:"argv" doc:"required: each argument quoted as one word, never joined into a script; a builtin such as cd or export, or eval SCRIPT for shell code, acts on the session's shell"`
	Env         map[string]string `json:"env,omitempty" doc:"this command only: it then runs in a subshell"`
	TimeoutSecs Seconds           `json:"timeout_secs,omitempty" doc:"sends SIGINT after that long; 0: none"`
	OutputLimit int64             `json:"output_limit_bytes,omitempty" doc:"output kept per stream; default: the session's"`
}

// CellResult is a finished Python cell.
type CellResult struct {
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	Value           *string    `json:"value" doc:"repr() of the trailing expression"`
	Error           *CellError `json:"error" doc:"the exception the cell raised"`
	ExitCode        int        `json:"exit_code" doc:"what python -c would exit with (0, 1, SystemExit's code)"`
	TimedOut        bool       `json:"timed_out"`
	Restarted       bool       `json:"restarted"`
	StdoutTruncated bool       `json:"stdout_truncated" doc:"output past the session's output_limit_bytes was dropped"`
	StderrTruncated bool       `json:"stderr_truncated"`
}

// CellError is the exception a cell raised.
type CellError struct {
	Type      string `json:"type" doc:"e.g. ValueError; InterpreterExited for an interpreter that died under the cell"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// CodeOptions run a code context's cell (boxlite_session_run_code).
type CodeOptions struct {
	TimeoutSecs Seconds           `json:"timeout_secs,omitempty" doc:"interrupts the cell after that long (KeyboardInterrupt, SIGINT); 0: none"`
	Env         map[string]string `json:"env,omitempty" doc:"set in the interpreter's environment for this cell only"`
}

// CodeExecution is what a code context's cell did.
type CodeExecution struct {
	Results          []CodeResult `json:"results" doc:"the last expression's value (is_main_result), display() calls and matplotlib figures, in order"`
	Logs             CodeLogs     `json:"logs"`
	Error            *CodeError   `json:"error" doc:"what the cell raised; null when it completed"`
	ExecutionCount   int          `json:"execution_count" doc:"the cells of the context, from 1 (a reset starts again)"`
	ResultsTruncated bool         `json:"results_truncated" doc:"results past the session's output_limit_bytes were dropped"`
	Restarted        bool         `json:"restarted" doc:"the interpreter ended under the cell and was started again: the state is gone"`
	TimedOut         bool         `json:"timed_out"`
}

// CodeResult is a rich result: a MIME bundle.
type CodeResult struct {
	IsMainResult bool              `json:"is_main_result" doc:"the value of the cell's last expression"`
	Data         map[string]string `json:"data" doc:"MIME type to representation: text/plain, text/html, text/markdown, image/svg+xml, text/latex, application/javascript as text; image/png, image/jpeg, application/pdf in base64; application/json as JSON text"`
}

// CodeLogs are what a cell printed, in the chunks it came in.
type CodeLogs struct {
	Stdout          []string `json:"stdout"`
	Stderr          []string `json:"stderr"`
	StdoutTruncated bool     `json:"stdout_truncated" doc:"output past the session's output_limit_bytes was dropped"`
	StderrTruncated bool     `json:"stderr_truncated"`
}

// CodeError is what a cell raised.
type CodeError struct {
	Name      string `json:"name" doc:"the exception's class (ZeroDivisionError, TypeError); ExitCode for a bash cell that exited non-zero"`
	Value     string `json:"value" doc:"its message (a bash cell's exit code)"`
	Traceback string `json:"traceback"`
}

// SessionInfo describes a session (boxlite_session_info).
type SessionInfo struct {
	Kind     string `json:"kind" enum:"python,shell,code:python,code:javascript,code:bash"`
	Pid      int    `json:"pid" doc:"in the box"`
	Restarts int    `json:"restarts"`
	Python   string `json:"python,omitempty" doc:"the interpreter's version (python sessions)"`
}

// ImageInfo describes an image in the store (boxlite_image_list, _load).
type ImageInfo struct {
	Name      string       `json:"name" doc:"canonical, e.g. docker.io/library/alpine:latest"`
	Digest    string       `json:"digest" doc:"the manifest's, sha256:..."`
	SizeBytes int64        `json:"size_bytes"`
	Layers    []ImageLayer `json:"layers" doc:"bottom first"`
	Config    ImageConfig  `json:"config"`
	CachedAt  string       `json:"cached_at,omitempty" doc:"RFC 3339: when it reached the store"`
}

// ImageLayer is one layer of an image.
type ImageLayer struct {
	DiffID    string `json:"diff_id" doc:"the uncompressed tar's digest"`
	SizeBytes int64  `json:"size_bytes" doc:"the blob as stored"`
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
	TimeoutSecs Seconds `json:"timeout_secs,omitempty" doc:"interrupts the cell after that long (KeyboardInterrupt); 0: none"`
}

// RuntimeOptions open a local runtime (boxlite_runtime_new).
type RuntimeOptions struct {
	Home        string          `json:"home,omitempty" doc:"the runtime's directory: default $BOXLITE_HOME, else ~/.boxlite"`
	Assets      string          `json:"assets,omitempty" doc:"where boxlite-shim and guest/ are: default $BOXLITE_ASSETS, else next to libboxlite.so"`
	OutputLimit int64           `json:"output_limit_bytes,omitempty" doc:"more than 0: what a collected result keeps per stream (boxlite_box_run, session results; the rest is read and dropped, the result says truncated): default {DEFAULT_OUTPUT_LIMIT_BYTES}"`
	MemoryCap   int64           `json:"running_memory_cap_mib,omitempty" doc:"more than 0: the guest memory (MiB) this runtime's running boxes may hold together; a start or resume past it pauses the least recently used idle ones first, else fails with limit_exceeded; default 0: no cap"`
	WarmPools   []WarmPool      `json:"warm_pools,omitempty" doc:"pools of boxes kept started and idle; a create of a pool's shape is handed one (box info's start is pool)"`
	PoolMemory  int64           `json:"warm_pool_memory_mib,omitempty" doc:"more than 0: the guest memory (MiB) all warm pools' boxes may hold together; default 0: no bound"`
	Registries  []ImageRegistry `json:"image_registries,omitempty" doc:"how pulls reach registries (BoxLite's ImageRegistry): transport, certificate checks, credentials, search order, mirrors; each host once"`
}

// ImageRegistry is one registry's settings for pulls (BoxLite 0.10's
// ImageRegistry). Its credentials are sent only to its host and never
// shown.
type ImageRegistry struct {
	Host        string   `json:"host" doc:"required: host or host:port (docker.io for Docker Hub)"`
	Transport   string   `json:"transport,omitempty" enum:"https,http" doc:"default https; http (plain) for a registry on loopback"`
	SkipVerify  bool     `json:"skip_verify,omitempty" doc:"TLS without checking the registry's certificate"`
	Search      bool     `json:"search,omitempty" doc:"look unqualified image names (alpine, library/python) up here, in the order given, instead of docker.io"`
	Username    string   `json:"username,omitempty" doc:"basic credentials, with password"`
	Password    string   `json:"password,omitempty" doc:"never shown"`
	BearerToken string   `json:"bearer_token,omitempty" doc:"instead of username and password; never shown"`
	Mirrors     []string `json:"mirrors,omitempty" doc:"URLs tried before the registry, as BOXLITE_REGISTRY_MIRRORS's (http:// is plain HTTP)"`
}

// WarmPool is one warm pool of a runtime (RuntimeOptions.WarmPools).
type WarmPool struct {
	Boxes int        `json:"boxes" doc:"boxes kept ready, 1 to 256"`
	Box   BoxOptions `json:"box" doc:"the shape, as box options (image required; volumes, ports, secrets, detach and a name cannot be pooled: invalid_argument)"`
}

// CloneOptions make a box's clone (boxlite_box_clone).
type CloneOptions struct {
	Name     string `json:"name,omitempty" doc:"the clone's name (names are unique: already_exists); default: none"`
	Snapshot string `json:"snapshot,omitempty" doc:"copy this snapshot of the box instead of its disk"`
}
