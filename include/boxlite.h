/*
 * boxlite.h: run untrusted code in microVM sandboxes ("boxes").
 *
 * A box is a virtual machine with its own Linux kernel, booted from an OCI
 * image. This header is the stable C ABI of libboxlite.so; the Python and Node
 * bindings and C/Rust programs use it directly.
 *
 * Conventions
 *   - Every object is an opaque handle. A handle is a token, not a pointer to
 *     memory: passing NULL, a freed handle, or a handle of the wrong kind gets
 *     BOXLITE_ERR_INVALID_ARGUMENT, never a crash.
 *   - Functions return an int status: BOXLITE_OK (0), an error code, or one of
 *     the non-error results BOXLITE_AGAIN / BOXLITE_EOF where documented.
 *     When `err` is not NULL and the call fails, *err receives an error object
 *     (code and message) that the caller frees with boxlite_error_free().
 *   - Everything the library allocates has its _free function: strings with
 *     boxlite_string_free(), results with boxlite_result_free().
 *   - Structured inputs and outputs (options, info, lists) are UTF-8 JSON
 *     strings, so new fields never change the ABI. Unknown input fields are
 *     rejected with BOXLITE_ERR_INVALID_ARGUMENT naming the field.
 *   - Durations, one convention:
 *     - How long something may run or take (a command's, a cell's, a copy's
 *       timeout; a box's boot timeout; a grace period) is a JSON number of
 *       seconds, fractions allowed, in a field named *_secs. 0 or absent
 *       means none unless the field says otherwise; a positive value under
 *       1 ms counts as 1 ms; negative, NaN and values over 1e9 are
 *       BOXLITE_ERR_INVALID_ARGUMENT.
 *     - How long a call may block (reads, waits) is its int64_t timeout_ms
 *       argument: 0 never blocks (BOXLITE_AGAIN when nothing is there yet),
 *       < 0 waits as long as it takes, > 0 at most that many milliseconds.
 *     - Outputs name their unit too (boot_ms, created_at_unix, ..._ms).
 *
 * Thread safety
 *   All functions may be called from any thread, concurrently, on the same or
 *   different handles. Blocking calls (box create/start/stop, run, wait with a
 *   timeout, blocking reads) block only the calling thread. Freeing a handle
 *   while another thread uses it makes that call fail cleanly.
 *
 * Process impact
 *   The library never calls exit(), never writes to or takes over stdio, and
 *   never lets a Go panic cross the ABI (it becomes BOXLITE_ERR_INTERNAL). It
 *   starts one helper process per box (boxlite-shim, which owns the VMM); a box
 *   stops when the process that created it exits. The Go runtime inside the
 *   library installs its own signal handlers with SA_ONSTACK and chains to
 *   handlers the host installed before loading it.
 *
 * Streaming
 *   Output is pull-based: boxlite_execution_read() returns what is buffered.
 *   With timeout_ms == 0 it never blocks (BOXLITE_AGAIN when nothing is there);
 *   an event loop waits for boxlite_execution_fd() to become readable, then
 *   reads each stream it wants until BOXLITE_AGAIN or BOXLITE_EOF. A stream
 *   the loop stops reading early (to pause it) does not keep the fd readable.
 *   No callbacks are ever made from library threads.
 */
#ifndef BOXLITE_H
#define BOXLITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BOXLITE_VERSION_MAJOR 0
#define BOXLITE_VERSION_MINOR 1
#define BOXLITE_VERSION_PATCH 0
#define BOXLITE_VERSION_STRING "0.1.0"

/* Status codes. 0 is success; 1-99 are errors (one per error kind, the same
 * kinds as the Python exception classes and the JS error.code strings);
 * 100+ are non-error results. */
#define BOXLITE_OK 0
/* BEGIN GENERATED: error codes (go generate ./errdefs; do not edit) */
/* "invalid_argument": A bad argument: malformed options, an unknown option, a value out of range. */
#define BOXLITE_ERR_INVALID_ARGUMENT 1
/* "not_found": No such box, image, snapshot, file or command. */
#define BOXLITE_ERR_NOT_FOUND 2
/* "already_exists": The name is taken: a box, a snapshot, a copy's destination, a host port. */
#define BOXLITE_ERR_ALREADY_EXISTS 3
/* "invalid_state": The box or execution is in the wrong state, e.g. exec on a stopped box. */
#define BOXLITE_ERR_INVALID_STATE 4
/* "timeout": An operation's or a command's timeout expired. */
#define BOXLITE_ERR_TIMEOUT 5
/* "unsupported": Not supported by this host, box or agent. */
#define BOXLITE_ERR_UNSUPPORTED 6
/* "boot_failed": The box did not boot; the message has the tail of its console. */
#define BOXLITE_ERR_BOOT_FAILED 7
/* "closed": The runtime, box or execution handle was closed. */
#define BOXLITE_ERR_CLOSED 8
/* "limit": A size or count limit was exceeded (an argument list, a copy's max_bytes). */
#define BOXLITE_ERR_LIMIT 9
/* "internal": A bug or an unexpected failure inside boxlite. */
#define BOXLITE_ERR_INTERNAL 10
/* "unreachable": A registry or another remote did not answer: no route, no name, refused. */
#define BOXLITE_ERR_UNREACHABLE 11
/* END GENERATED: error codes */
#define BOXLITE_AGAIN 100 /* nothing available yet; poll boxlite_execution_fd() */
#define BOXLITE_EOF 101   /* the stream has ended */

/* Defaults and limits of box options and commands (internal/abi/limits.go). */
/* BEGIN GENERATED: defaults (go generate ./errdefs; do not edit) */
#define BOXLITE_DEFAULT_MEMORY_MIB 512 /* a box's guest memory */
#define BOXLITE_MIN_MEMORY_MIB 64 /* the least guest memory a box may have */
#define BOXLITE_MAX_MEMORY_MIB 65536 /* the most guest memory a box may have */
#define BOXLITE_DEFAULT_CPUS 1 /* a box's virtual CPUs */
#define BOXLITE_MIN_CPUS 1 /* the fewest virtual CPUs a box may have */
#define BOXLITE_MAX_CPUS 64 /* the most virtual CPUs a box may have */
#define BOXLITE_DEFAULT_DISK_SIZE_GB 4 /* a box's writable disk (sparse: it costs what the box writes) */
#define BOXLITE_MIN_DISK_SIZE_GB 1 /* the smallest writable disk a box may have */
#define BOXLITE_MAX_DISK_SIZE_GB 1024 /* the largest writable disk a box may have */
#define BOXLITE_DEFAULT_BOOT_TIMEOUT_SECS 60 /* how long a start may take until the box's agent answers */
#define BOXLITE_MAX_BOOT_TIMEOUT_SECS 600 /* the longest boot timeout a box may ask for */
#define BOXLITE_MAX_AUTO_PAUSE_SECS 2592000 /* the longest idle period before a box pauses itself (auto_pause_secs) */
#define BOXLITE_DEFAULT_OUTPUT_LIMIT_BYTES 67108864 /* output collected per stream of a run, a cell or a shell command */
#define BOXLITE_DEFAULT_ROWS 24 /* a terminal's initial rows */
#define BOXLITE_DEFAULT_COLS 80 /* a terminal's initial columns */
#define BOXLITE_DEFAULT_SESSION_GRACE_SECS 3 /* how long an interrupted cell or shell command has to stop before its session restarts */
#define BOXLITE_DEFAULT_COPY_OUT_MAX_BYTES 1073741824 /* the file data a copy out of a box may bring unless its options say otherwise */
#define BOXLITE_DEFAULT_COPY_OUT_MAX_ENTRIES 100000 /* the entries a copy out of a box may bring unless its options say otherwise */
#define BOXLITE_MAX_SECRETS 32 /* the most secrets a box may have */
#define BOXLITE_MAX_SECRET_VALUE_BYTES 16384 /* the longest value a secret may have */
#define BOXLITE_DEFAULT_HEALTH_INTERVAL_SECS 30 /* between a box's health checks */
#define BOXLITE_DEFAULT_HEALTH_TIMEOUT_SECS 10 /* how long a health check may take to pass */
#define BOXLITE_DEFAULT_HEALTH_RETRIES 3 /* failed health checks in a row that make a box unhealthy */
#define BOXLITE_DEFAULT_HEALTH_START_PERIOD_SECS 60 /* how long after a box is ready its failed health checks do not count */
#define BOXLITE_SECURITY_MAXIMUM_MAX_OPEN_FILES 1024 /* open files of every box process under the maximum security preset */
#define BOXLITE_SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES 1073741824 /* the largest file a box process may write under the maximum security preset */
#define BOXLITE_SECURITY_MAXIMUM_MAX_PROCESSES 100 /* processes of a box user (root exempt) under the maximum security preset */
#define BOXLITE_DEFAULT_AUTO_REMOVE 1 /* a box is removed when it stops unless its options say otherwise */
/* END GENERATED: defaults */

/* Output stream selectors for boxlite_execution_read(). */
#define BOXLITE_STDOUT 1
#define BOXLITE_STDERR 2

typedef struct boxlite_runtime boxlite_runtime_t;
typedef struct boxlite_box boxlite_box_t;
typedef struct boxlite_execution boxlite_execution_t;
typedef struct boxlite_forwarder boxlite_forwarder_t; /* a tunnel forwarder (see tunnels) */

typedef struct boxlite_error {
  int code;      /* a BOXLITE_ERR_* code */
  char *message; /* UTF-8, says what failed and in which state */
} boxlite_error_t;

/* How a process ended. exit_code is 128+signal when a signal killed it. */
typedef struct boxlite_exit {
  int exit_code;
  int signal;    /* 0 unless killed by a signal */
  int timed_out; /* 1 when the command's timeout killed it */
} boxlite_exit_t;

/* A finished process and its collected output (boxlite_box_run). */
typedef struct boxlite_result {
  boxlite_exit_t exit;
  uint8_t *stdout_data;
  size_t stdout_len;
  uint8_t *stderr_data;
  size_t stderr_len;
  int stdout_truncated; /* 1 when output past the limit was dropped */
  int stderr_truncated;
} boxlite_result_t;

/* ---- library ---- */

/* The library version, "MAJOR.MINOR.PATCH"; static, do not free. */
const char *boxlite_version(void);
/* The stable name of a status code ("not_found", "again", ...); static. */
const char *boxlite_status_name(int code);
void boxlite_error_free(boxlite_error_t *err);
void boxlite_string_free(char *s);

/* ---- runtime: a home directory with its images and boxes ---- */

/* options_json may be NULL (all defaults) or an object of:
 * BEGIN GENERATED: runtime options (from internal/abi.RuntimeOptions: go generate ./errdefs; do not edit)
 *   "home": string: the runtime's directory: default $BOXLITE_HOME, else ~/.boxlite
 *   "assets": string: where boxlite-shim and guest/ are: default $BOXLITE_ASSETS, else next to
 *       libboxlite.so
 *   "output_limit_bytes": integer: more than 0: what a collected result keeps per stream
 *       (boxlite_box_run, session results; the rest is read and dropped, the result says
 *       truncated): default 67108864
 *   "running_memory_cap_mib": integer: more than 0: the guest memory (MiB) this runtime's
 *       running boxes may hold together; a start or resume past it pauses the least recently
 *       used idle ones first, else fails with limit_exceeded; default 0: no cap
 *   "warm_pools": [{...}]: pools of boxes kept started and idle; a create of a pool's shape is
 *       handed one (box info's start is pool)
 *     "boxes": integer: boxes kept ready, 1 to 256
 *     "box": {...}: the shape, as box options (image required; volumes, ports, secrets, detach
 *         and a name cannot be pooled: invalid_argument)
 *       "image": string, required: an image in the store or a registry, e.g. "alpine:latest"
 *       "name": string: 1-64 of [a-zA-Z0-9_.-], starting with a letter or digit
 *       "memory_mib": integer: guest memory: default 512, 64..65536
 *       "cpus": integer: virtual CPUs: default 1, 1..64
 *       "disk_size_gb": integer: writable disk (sparse): default 4, 1..1024
 *       "env": {string: string}: added to the image's
 *       "working_dir": string: default: the image's
 *       "user": string: name, uid or uid:gid; default: the image's
 *       "boot_timeout_secs": number: VM start to agent ready: default 60, more than 0, at most
 *           600
 *       "auto_remove": boolean: remove the box when it stops (never while only configured):
 *           default true
 *       "detach": boolean: the box outlives the process that starts it: closing the runtime
 *           leaves it running, any process reattaches by id or name; default false
 *       "entrypoint": [string]: overrides the image's (and drops its cmd, as docker's
 *           --entrypoint does): what an exec with no argv runs
 *       "cmd": [string]: overrides the image's
 *       "network": {...}: default: enabled, no allow-list
 *         "mode": "enabled" | "disabled": the flat form's outbound mode: enabled (default: NAT
 *             to the host's network) or disabled (no NIC, only lo)
 *         "allow_net": [string]: the flat form's: where an enabled box may connect: host names,
 *             *.wildcards, IPv4 addresses or CIDRs, each optionally with :port; empty:
 *             anywhere. The host's 127.0.0.1 is host.boxlite.internal in the box (with a list,
 *             only when listed)
 *         "outbound": {...}: BoxLite's split form: mode and allow_net as the flat form's
 *           "mode": "enabled" | "disabled", required
 *           "allow_net": [string]: outbound: where the box may connect, as the flat allow_net;
 *               inbound: must be empty
 *         "inbound": {...}: BoxLite's split form: the inbound mode (kept and reported: a local
 *             box has no public side); a non-empty allow_net is unsupported, as in BoxLite
 *           "mode": "enabled" | "disabled", required
 *           "allow_net": [string]: outbound: where the box may connect, as the flat allow_net;
 *               inbound: must be empty
 *       "ports": [{...}]: box ports published on the host; a host port in use is already_exists
 *         "protocol": "tcp" | "udp": default tcp
 *         "host_ip": string: the host address to bind: default 127.0.0.1
 *         "host_port": integer: 0 (or absent) picks a free port; info shows the one bound
 *         "guest_port": integer, required: the port in the box
 *       "volumes": [{...}]: host folders or files in the box, over virtio-fs
 *         "host_path": string, required: a host folder or file
 *         "guest_path": string, required: where the box sees it
 *         "read_only": boolean: default false
 *         "size_limit_bytes": integer: what the box may store in a read-write folder (a
 *             watcher, see docs/SECURITY.md); 0: no limit
 *       "hostname": string: a DNS label: default "boxlite"
 *       "auto_pause_secs": number: pause the box (with its memory, as boxlite_box_pause) after
 *           this long with no exec, copy or session call: a stream that stays open holds it
 *           awake, except a detachable exec's (a session's interpreter, an interactive shell)
 *           that sent nothing either way for that long; the next call resumes it. 0 (default):
 *           never. At least 1, at most 2592000; not with volumes
 *       "prestart": [string]: sessions a box started from a template finds started: "python",
 *           "shell" or "shell:/ABSOLUTE/PATH"; its first session of that kind with default
 *           options takes over the one the template VM started
 *       "secrets": [{...}]: credentials the box uses without holding them: it sees each one's
 *           placeholder (env BOXLITE_SECRET_<NAME>), the host puts the value in HTTPS requests
 *           to its hosts; at most 32, see docs/secrets.md
 *         "name": string, required: names the env variable BOXLITE_SECRET_<NAME> (upper case)
 *         "value": string, required: the real value, 1 to 16384 bytes without line breaks;
 *             never in box info
 *         "hosts": [string], required: host names or *.wildcards, optionally :port (default
 *             443), where HTTPS requests get the value; each is reachable on that port even
 *             when allow_net does not list it
 *         "placeholder": string: what the box sees: default "<BOXLITE_SECRET:NAME>"
 *       "advanced": {...}: BoxLite's AdvancedBoxOptions: capabilities, security, health_check
 *           (docs/security-options.md); a box with capabilities or security boots (no template,
 *           no warm pool)
 *         "capabilities": {...}: added to and dropped from the default capability set of box
 *             processes (docker's default set without MKNOD)
 *           "add": [string]: Linux capability names (NET_ADMIN or CAP_NET_ADMIN, any case; ALL
 *               is every one); an unknown one is invalid_argument naming it
 *           "drop": [string]: removed after add (a name in both is dropped)
 *         "security": {...}: isolation settings; absent: BoxLite's standard preset
 *           "jailer_enabled": boolean: the VMM runs in the host jail (namespaces, its own uid,
 *               cgroup, seccomp, no_new_privs): default true
 *           "seccomp_enabled": boolean: box processes run under the box's seccomp filter:
 *               default true
 *           "max_open_files": integer: RLIMIT_NOFILE of every box process: default none
 *           "max_file_size_bytes": integer: BoxLite's max_file_size: RLIMIT_FSIZE of every box
 *               process: default none
 *           "max_processes": integer: RLIMIT_NPROC of every box process (Linux does not hold
 *               root to it): default none
 *           "max_memory_bytes": integer: BoxLite's max_memory: RLIMIT_AS of every box process:
 *               default none
 *           "max_cpu_time_secs": integer: BoxLite's max_cpu_time: RLIMIT_CPU of every box
 *               process: default none
 *           "network_enabled": boolean: BoxLite's macOS-only setting: default true; false is
 *               unsupported (use network mode disabled)
 *           "close_fds": boolean: default true; the shim and VMM always start with only the
 *               descriptors they use
 *         "health_check": {...}: a command the box's shim runs in the box now and then; info's
 *             health_status reports it
 *           "interval_secs": number: between checks: default 30
 *           "timeout_secs": number: a check that has not exited 0 by then fails: default 10
 *           "retries": integer: failures in a row that make the box unhealthy: default 3
 *           "start_period_secs": number: after the box is ready, failures do not count for this
 *               long: default 60
 *           "command": [string]: what a check runs (root, in /, a default PATH): default
 *               ["true"], which passes when the agent can start a process in the box
 *   "warm_pool_memory_mib": integer: more than 0: the guest memory (MiB) all warm pools' boxes
 *       may hold together; default 0: no bound
 *   "image_registries": [{...}]: how pulls reach registries (BoxLite's ImageRegistry):
 *       transport, certificate checks, credentials, search order, mirrors; each host once
 *     "host": string, required: host or host:port (docker.io for Docker Hub)
 *     "transport": "https" | "http": default https; http (plain) for a registry on loopback
 *     "skip_verify": boolean: TLS without checking the registry's certificate
 *     "search": boolean: look unqualified image names (alpine, library/python) up here, in the
 *         order given, instead of docker.io
 *     "username": string: basic credentials, with password
 *     "password": string: never shown
 *     "bearer_token": string: instead of username and password; never shown
 *     "mirrors": [string]: URLs tried before the registry, as BOXLITE_REGISTRY_MIRRORS's
 *         (http:// is plain HTTP)
 * END GENERATED: runtime options
 */
int boxlite_runtime_new(const char *options_json, boxlite_runtime_t **out, boxlite_error_t **err);
/* A runtime whose boxes live on a server of BoxLite's REST API (boxlite
 * serve): options_json is an object of:
 * BEGIN GENERATED: rest options (from internal/abi.RestOptions: go generate ./errdefs; do not edit)
 *   "url": string, required: http or https; the /v1 prefix is added when missing
 *   "api_key": string, required: sent in the Authorization header, never logged nor put in an
 *       error
 *   "output_limit_bytes": integer: as boxlite_runtime_new's: default 67108864
 *   "insecure_http": boolean: allow plain http to a host other than loopback: default false
 * END GENERATED: rest options
 * Plain http goes only to a loopback host unless insecure_http. Every call
 * on the runtime's boxes and executions works as on a local one, except
 * what names this machine's files for the server: image_load,
 * runtime_import_box, volumes and ports in box options fail with
 * BOXLITE_ERR_UNSUPPORTED. Nothing is sent until the first call. */
int boxlite_runtime_new_rest(const char *options_json, boxlite_runtime_t **out, boxlite_error_t **err);
/* Stops the boxes this runtime started (not detached ones, which keep running) and frees the handle. NULL is a no-op. */
void boxlite_runtime_free(boxlite_runtime_t *rt);
/* Imports an OCI layout directory or docker-archive tar; *out_json is a JSON
 * array of the loaded images. */
int boxlite_image_load(boxlite_runtime_t *rt, const char *path, char **out_json, boxlite_error_t **err);
/* A JSON array of images, each an object of:
 * BEGIN GENERATED: image info (from internal/abi.ImageInfo: go generate ./errdefs; do not edit)
 *   "name": string: canonical, e.g. docker.io/library/alpine:latest
 *   "digest": string: the manifest's, sha256:...
 *   "size_bytes": integer
 *   "layers": [{...}]: bottom first
 *     "diff_id": string: the uncompressed tar's digest
 *     "size_bytes": integer: the blob as stored
 *   "config": {...}
 *     "env": [string], optional
 *     "working_dir": string, optional
 *     "user": string, optional
 *     "entrypoint": [string], optional
 *     "cmd": [string], optional
 *   "cached_at": string, optional: RFC 3339: when it reached the store
 * END GENERATED: image info
 */
int boxlite_image_list(boxlite_runtime_t *rt, char **out_json, boxlite_error_t **err);
/* Pulls the image reference (e.g. "alpine:latest") from its registry (or a
 * mirror) into the store; *out_json is its image object, as in image_list.
 * Blocks for the pull. BOXLITE_ERR_UNREACHABLE when no registry answers. */
int boxlite_image_pull(boxlite_runtime_t *rt, const char *reference, char **out_json, boxlite_error_t **err);
/* Drops the name reference from the store (a digest: the image with all its
 * names); BOXLITE_ERR_NOT_FOUND if the store has no such name. Boxes that use
 * the image keep working (its files go only when nothing uses them). */
int boxlite_image_remove(boxlite_runtime_t *rt, const char *reference, boxlite_error_t **err);
/* JSON array of box infos, newest first. */
int boxlite_box_list(boxlite_runtime_t *rt, char **out_json, boxlite_error_t **err);

/* ---- boxes ---- */

/* Creates a box and returns it configured, not booted (as BoxLite's create):
 * its options are checked and its image pulled if the store lacks it;
 * boxlite_box_start boots it, and so does the first exec, copy or session.
 * options_json, an object of (absent fields take the defaults):
 * BEGIN GENERATED: box options (from internal/abi.BoxOptions: go generate ./errdefs; do not edit)
 *   "image": string, required: an image in the store or a registry, e.g. "alpine:latest"
 *   "name": string: 1-64 of [a-zA-Z0-9_.-], starting with a letter or digit
 *   "memory_mib": integer: guest memory: default 512, 64..65536
 *   "cpus": integer: virtual CPUs: default 1, 1..64
 *   "disk_size_gb": integer: writable disk (sparse): default 4, 1..1024
 *   "env": {string: string}: added to the image's
 *   "working_dir": string: default: the image's
 *   "user": string: name, uid or uid:gid; default: the image's
 *   "boot_timeout_secs": number: VM start to agent ready: default 60, more than 0, at most 600
 *   "auto_remove": boolean: remove the box when it stops (never while only configured): default
 *       true
 *   "detach": boolean: the box outlives the process that starts it: closing the runtime leaves
 *       it running, any process reattaches by id or name; default false
 *   "entrypoint": [string]: overrides the image's (and drops its cmd, as docker's --entrypoint
 *       does): what an exec with no argv runs
 *   "cmd": [string]: overrides the image's
 *   "network": {...}: default: enabled, no allow-list
 *     "mode": "enabled" | "disabled": the flat form's outbound mode: enabled (default: NAT to
 *         the host's network) or disabled (no NIC, only lo)
 *     "allow_net": [string]: the flat form's: where an enabled box may connect: host names,
 *         *.wildcards, IPv4 addresses or CIDRs, each optionally with :port; empty: anywhere.
 *         The host's 127.0.0.1 is host.boxlite.internal in the box (with a list, only when
 *         listed)
 *     "outbound": {...}: BoxLite's split form: mode and allow_net as the flat form's
 *       "mode": "enabled" | "disabled", required
 *       "allow_net": [string]: outbound: where the box may connect, as the flat allow_net;
 *           inbound: must be empty
 *     "inbound": {...}: BoxLite's split form: the inbound mode (kept and reported: a local box
 *         has no public side); a non-empty allow_net is unsupported, as in BoxLite
 *       "mode": "enabled" | "disabled", required
 *       "allow_net": [string]: outbound: where the box may connect, as the flat allow_net;
 *           inbound: must be empty
 *   "ports": [{...}]: box ports published on the host; a host port in use is already_exists
 *     "protocol": "tcp" | "udp": default tcp
 *     "host_ip": string: the host address to bind: default 127.0.0.1
 *     "host_port": integer: 0 (or absent) picks a free port; info shows the one bound
 *     "guest_port": integer, required: the port in the box
 *   "volumes": [{...}]: host folders or files in the box, over virtio-fs
 *     "host_path": string, required: a host folder or file
 *     "guest_path": string, required: where the box sees it
 *     "read_only": boolean: default false
 *     "size_limit_bytes": integer: what the box may store in a read-write folder (a watcher,
 *         see docs/SECURITY.md); 0: no limit
 *   "hostname": string: a DNS label: default "boxlite"
 *   "auto_pause_secs": number: pause the box (with its memory, as boxlite_box_pause) after this
 *       long with no exec, copy or session call: a stream that stays open holds it awake,
 *       except a detachable exec's (a session's interpreter, an interactive shell) that sent
 *       nothing either way for that long; the next call resumes it. 0 (default): never. At
 *       least 1, at most 2592000; not with volumes
 *   "prestart": [string]: sessions a box started from a template finds started: "python",
 *       "shell" or "shell:/ABSOLUTE/PATH"; its first session of that kind with default options
 *       takes over the one the template VM started
 *   "secrets": [{...}]: credentials the box uses without holding them: it sees each one's
 *       placeholder (env BOXLITE_SECRET_<NAME>), the host puts the value in HTTPS requests to
 *       its hosts; at most 32, see docs/secrets.md
 *     "name": string, required: names the env variable BOXLITE_SECRET_<NAME> (upper case)
 *     "value": string, required: the real value, 1 to 16384 bytes without line breaks; never in
 *         box info
 *     "hosts": [string], required: host names or *.wildcards, optionally :port (default 443),
 *         where HTTPS requests get the value; each is reachable on that port even when
 *         allow_net does not list it
 *     "placeholder": string: what the box sees: default "<BOXLITE_SECRET:NAME>"
 *   "advanced": {...}: BoxLite's AdvancedBoxOptions: capabilities, security, health_check
 *       (docs/security-options.md); a box with capabilities or security boots (no template, no
 *       warm pool)
 *     "capabilities": {...}: added to and dropped from the default capability set of box
 *         processes (docker's default set without MKNOD)
 *       "add": [string]: Linux capability names (NET_ADMIN or CAP_NET_ADMIN, any case; ALL is
 *           every one); an unknown one is invalid_argument naming it
 *       "drop": [string]: removed after add (a name in both is dropped)
 *     "security": {...}: isolation settings; absent: BoxLite's standard preset
 *       "jailer_enabled": boolean: the VMM runs in the host jail (namespaces, its own uid,
 *           cgroup, seccomp, no_new_privs): default true
 *       "seccomp_enabled": boolean: box processes run under the box's seccomp filter: default
 *           true
 *       "max_open_files": integer: RLIMIT_NOFILE of every box process: default none
 *       "max_file_size_bytes": integer: BoxLite's max_file_size: RLIMIT_FSIZE of every box
 *           process: default none
 *       "max_processes": integer: RLIMIT_NPROC of every box process (Linux does not hold root
 *           to it): default none
 *       "max_memory_bytes": integer: BoxLite's max_memory: RLIMIT_AS of every box process:
 *           default none
 *       "max_cpu_time_secs": integer: BoxLite's max_cpu_time: RLIMIT_CPU of every box process:
 *           default none
 *       "network_enabled": boolean: BoxLite's macOS-only setting: default true; false is
 *           unsupported (use network mode disabled)
 *       "close_fds": boolean: default true; the shim and VMM always start with only the
 *           descriptors they use
 *     "health_check": {...}: a command the box's shim runs in the box now and then; info's
 *         health_status reports it
 *       "interval_secs": number: between checks: default 30
 *       "timeout_secs": number: a check that has not exited 0 by then fails: default 10
 *       "retries": integer: failures in a row that make the box unhealthy: default 3
 *       "start_period_secs": number: after the box is ready, failures do not count for this
 *           long: default 60
 *       "command": [string]: what a check runs (root, in /, a default PATH): default ["true"],
 *           which passes when the agent can start a process in the box
 * END GENERATED: box options
 * The box reaches the host's 127.0.0.1 as host.boxlite.internal (only when
 * listed, if allow_net is set). A host port already in use fails with
 * BOXLITE_ERR_ALREADY_EXISTS; a bad network or port with INVALID_ARGUMENT. */
int boxlite_box_create(boxlite_runtime_t *rt, const char *options_json, boxlite_box_t **out,
                       boxlite_error_t **err);
/* Opens an existing box by id, unique id prefix, or name. */
int boxlite_box_get(boxlite_runtime_t *rt, const char *id_or_name, boxlite_box_t **out,
                    boxlite_error_t **err);
/* The box id (12 hex digits); static for the handle's life, do not free. */
const char *boxlite_box_id(boxlite_box_t *box);
/* The box's info, an object of:
 * BEGIN GENERATED: box info (from internal/abi.BoxInfo: go generate ./errdefs; do not edit)
 *   "id": string: 12 hex digits
 *   "name": string, optional
 *   "image": string
 *   "state": "configured" | "starting" | "running" | "paused" | "stopping" | "stopped" |
 *       "removed"
 *   "created_at_unix": integer: seconds
 *   "created_at": string: RFC 3339, the same instant
 *   "config": {...}: the create options with defaults applied
 *     "image": string
 *     "name": string, optional
 *     "memory_mib": integer
 *     "cpus": integer
 *     "disk_size_gb": integer
 *     "env": {string: string}, optional
 *     "working_dir": string, optional
 *     "user": string, optional
 *     "boot_timeout_secs": number
 *     "auto_remove": boolean
 *     "detach": boolean
 *     "entrypoint": [string], optional
 *     "cmd": [string], optional
 *     "network": {...}
 *       "mode": "enabled" | "disabled", optional: the flat form's outbound mode: enabled
 *           (default: NAT to the host's network) or disabled (no NIC, only lo)
 *       "allow_net": [string], optional: the flat form's: where an enabled box may connect:
 *           host names, *.wildcards, IPv4 addresses or CIDRs, each optionally with :port;
 *           empty: anywhere. The host's 127.0.0.1 is host.boxlite.internal in the box (with a
 *           list, only when listed)
 *       "outbound": {...}, optional: BoxLite's split form: mode and allow_net as the flat
 *           form's
 *         "mode": "enabled" | "disabled"
 *         "allow_net": [string], optional: outbound: where the box may connect, as the flat
 *             allow_net; inbound: must be empty
 *       "inbound": {...}, optional: BoxLite's split form: the inbound mode (kept and reported:
 *           a local box has no public side); a non-empty allow_net is unsupported, as in
 *           BoxLite
 *         "mode": "enabled" | "disabled"
 *         "allow_net": [string], optional: outbound: where the box may connect, as the flat
 *             allow_net; inbound: must be empty
 *     "ports": [{...}], optional: as asked (host_port 0: any); the runtime's network shows them
 *         bound
 *       "protocol": "tcp" | "udp", optional: default tcp
 *       "host_ip": string, optional: the host address to bind: default 127.0.0.1
 *       "host_port": integer: 0 (or absent) picks a free port; info shows the one bound
 *       "guest_port": integer: the port in the box
 *     "volumes": [{...}], optional
 *       "host_path": string: a host folder or file
 *       "guest_path": string: where the box sees it
 *       "read_only": boolean, optional: default false
 *       "size_limit_bytes": integer, optional: what the box may store in a read-write folder (a
 *           watcher, see docs/SECURITY.md); 0: no limit
 *     "kernel_args": [string], optional
 *     "hostname": string
 *     "prestart": [string], optional
 *     "auto_pause_secs": number, optional: 0: never
 *     "secrets": [{...}], optional: names, hosts and placeholders: never the values
 *       "name": string
 *       "hosts": [string]
 *       "placeholder": string
 *     "advanced": {...}, optional: as given (absent fields are the defaults)
 *       "capabilities": {...}, optional: added to and dropped from the default capability set
 *           of box processes (docker's default set without MKNOD)
 *         "add": [string], optional: Linux capability names (NET_ADMIN or CAP_NET_ADMIN, any
 *             case; ALL is every one); an unknown one is invalid_argument naming it
 *         "drop": [string], optional: removed after add (a name in both is dropped)
 *       "security": {...}, optional: isolation settings; absent: BoxLite's standard preset
 *         "jailer_enabled": boolean, optional: the VMM runs in the host jail (namespaces, its
 *             own uid, cgroup, seccomp, no_new_privs): default true
 *         "seccomp_enabled": boolean, optional: box processes run under the box's seccomp
 *             filter: default true
 *         "max_open_files": integer, optional: RLIMIT_NOFILE of every box process: default none
 *         "max_file_size_bytes": integer, optional: BoxLite's max_file_size: RLIMIT_FSIZE of
 *             every box process: default none
 *         "max_processes": integer, optional: RLIMIT_NPROC of every box process (Linux does not
 *             hold root to it): default none
 *         "max_memory_bytes": integer, optional: BoxLite's max_memory: RLIMIT_AS of every box
 *             process: default none
 *         "max_cpu_time_secs": integer, optional: BoxLite's max_cpu_time: RLIMIT_CPU of every
 *             box process: default none
 *         "network_enabled": boolean, optional: BoxLite's macOS-only setting: default true;
 *             false is unsupported (use network mode disabled)
 *         "close_fds": boolean, optional: default true; the shim and VMM always start with only
 *             the descriptors they use
 *       "health_check": {...}, optional: a command the box's shim runs in the box now and then;
 *           info's health_status reports it
 *         "interval_secs": number, optional: between checks: default 30
 *         "timeout_secs": number, optional: a check that has not exited 0 by then fails:
 *             default 10
 *         "retries": integer, optional: failures in a row that make the box unhealthy: default
 *             3
 *         "start_period_secs": number, optional: after the box is ready, failures do not count
 *             for this long: default 60
 *         "command": [string], optional: what a check runs (root, in /, a default PATH):
 *             default ["true"], which passes when the agent can start a process in the box
 *   "dir": string: the box's directory
 *   "last_exit": string, optional: why the box last stopped
 *   "faulted": boolean, optional: its last run ended in a fault (a crashed VMM, a protocol
 *       violation): exec does not start it again, start does
 *   "runtime": {...}, optional: only while it runs
 *     "accel": string: the VMM's acceleration: kvm or tcg
 *     "accel_reason": string: why that acceleration
 *     "kernel": string: the guest kernel's path
 *     "boot_ms": number: host clock: VMM start to agent ready
 *     "guest_kernel_ms": number: guest clock: boot to agent start
 *     "guest_ready_ms": number: guest clock: boot to ready
 *     "shim_pid": integer
 *     "vmm_pid": integer
 *     "start": "boot" | "template" | "new-template", optional: how the VM came up: a boot, a
 *         template (a warm start), or a boot that made its shape's template first
 *     "start_note": string, optional: why a box that could have started from a template booted
 *     "warnings": [string], optional: what weakens this box's isolation (TCG, a missing VMM
 *         confinement layer); see docs/SECURITY.md
 *     "network": {...}, optional: absent when disabled
 *       "guest_ip": string
 *       "gateway_ip": string
 *       "allow_net": [string], optional
 *       "ports": [{...}], optional: as bound, host ports picked
 *         "protocol": "tcp" | "udp", optional: default tcp
 *         "host_ip": string, optional: the host address to bind: default 127.0.0.1
 *         "host_port": integer: 0 (or absent) picks a free port; info shows the one bound
 *         "guest_port": integer: the port in the box
 *       "stats": {...}, optional
 *         "bytes_to_guest": integer
 *         "bytes_from_guest": integer
 *         "tcp_connections": integer: opened, not open
 *         "tcp_errors": integer: TCP connections the host could not open
 *         "udp_flows": integer
 *     "started_at": string, optional: RFC 3339: when the VM became ready (BoxLite's started_at)
 *     "last_activity_at": string, optional: RFC 3339: the later of started_at and the last
 *         exec, copy or session call this process saw
 *   "network": {...}: the network policy now (update_outbound changes it)
 *     "outbound": {...}
 *       "mode": "enabled" | "disabled"
 *       "allow_net": [string], optional: outbound: where the box may connect, as the flat
 *           allow_net; inbound: must be empty
 *     "inbound": {...}
 *       "mode": "enabled" | "disabled"
 *       "allow_net": [string], optional: outbound: where the box may connect, as the flat
 *           allow_net; inbound: must be empty
 *     "mode": string: the outbound mode (BoxLite's deprecated mirror)
 *     "allow_net": [string]: the outbound allow_net (BoxLite's deprecated mirror)
 *     "published_ports": [{...}]: as bound while the box runs, else as asked
 *       "protocol": "tcp" | "udp", optional: default tcp
 *       "host_ip": string, optional: the host address to bind: default 127.0.0.1
 *       "host_port": integer: 0 (or absent) picks a free port; info shows the one bound
 *       "guest_port": integer: the port in the box
 *   "health_status": {...}: its health check's state (BoxLite's)
 *     "state": "none" | "starting" | "healthy" | "unhealthy": none: no health check, or not
 *         running
 *     "failures": integer: failed checks in a row that counted
 *     "last_check": string, optional: RFC 3339: when the last check ended
 *     "last_error": string, optional: why the last check failed
 * END GENERATED: box info
 */
int boxlite_box_info(boxlite_box_t *box, char **out_json, boxlite_error_t **err);
/* Boots a configured or stopped box; blocks until its agent is ready. A
 * running box: a no-op success. Exec, copies and sessions on a configured
 * or stopped box start it the same way, except a box whose last run ended
 * in a fault (crashed VMM, protocol violation): that one fails with
 * BOXLITE_ERR_INVALID_STATE naming the fault until started here. */
int boxlite_box_start(boxlite_box_t *box, boxlite_error_t **err);
/* Stops a running box (a configured or stopped one: no-op); an auto-remove
 * box is removed. */
int boxlite_box_stop(boxlite_box_t *box, boxlite_error_t **err);
/* Pauses a running box with its memory: saves its devices, vCPUs and memory
 * into its directory and ends its VMM, network stack and shim, so a paused
 * box ("state": "paused") holds no process and no host memory and outlives
 * this process (a detached one resumes from any process). A paused box: a
 * no-op success; another state but running: BOXLITE_ERR_INVALID_STATE. A box
 * with volumes, or one on a REST runtime: BOXLITE_ERR_UNSUPPORTED; no room on
 * the host disk for its memory: BOXLITE_ERR_LIMIT; a failed pause
 * leaves the box running. The box's streams end (a detachable exec runs on).
 * out_json (NULL: not wanted) receives {"saved_at": RFC 3339 time,
 * "state_bytes": N (the saved state on disk), "save_ms": N}. */
int boxlite_box_pause(boxlite_box_t *box, char **out_json, boxlite_error_t **err);
/* Resumes a paused box as the same machine (processes, memory, hostname,
 * boot id), its network and published ports started anew; a running box: a
 * no-op success. Exec, copies, sessions and metrics resume a paused box
 * themselves. A state saved by another QEMU, kernel, agent or machine shape
 * fails with BOXLITE_ERR_UNSUPPORTED and the box is left stopped with its
 * disk (boxlite_box_start then cold-boots it). */
int boxlite_box_resume(boxlite_box_t *box, boxlite_error_t **err);
/* Deletes the box and its disk; a running box needs force != 0. The handle
 * must still be freed. */
int boxlite_box_remove(boxlite_box_t *box, int force, boxlite_error_t **err);
/* Releases the handle; the box itself keeps running. NULL is a no-op. */
void boxlite_box_free(boxlite_box_t *box);

/* ---- metrics (BoxLite's names) ---- */

/* A running box's metrics, *out_json (boxlite_string_free), an object of:
 * BEGIN GENERATED: box metrics (from internal/abi.BoxMetrics: go generate ./errdefs; do not edit)
 *   "commands_executed_total": integer: exec requests, from every process that uses the box
 *   "exec_errors_total": integer: of those, the ones that never ran
 *   "bytes_sent_total": integer: exec stdin
 *   "bytes_received_total": integer: exec stdout and stderr (copies excluded)
 *   "guest_boot_duration_ms": number: VMM start to agent ready, host clock
 *   "total_create_duration_ms": number or null: the last start by this library, start to ready:
 *       the sum of the six stages after it
 *   "stage_image_prepare_ms": number or null: find the image in the store
 *   "stage_guest_rootfs_ms": number or null: the image's layers as the guest's root disks
 *       (cached per image)
 *   "stage_filesystem_setup_ms": number or null: the box's writable disk and directory
 *   "stage_box_config_ms": number or null: the shim's configuration
 *   "stage_boot_queue_ms": number or null: wait for a boot slot
 *   "stage_box_spawn_ms": number or null: shim start to ready, the guest boot included
 *   "stage_container_init_ms": number or null: the agent's own setup, by the guest's clock
 *   "cpu_percent": number or null: the VMM's CPU since the shim's latest sample at least 1 s
 *       old (taken when asked), in percent of one host CPU (up to 100 per vCPU)
 *   "memory_bytes": integer or null: the VMM's resident memory
 *   "network_bytes_sent": integer or null: host to guest
 *   "network_bytes_received": integer or null: guest to host
 *   "network_tcp_connections": integer or null: TCP connections opened
 *   "network_tcp_errors": integer or null: TCP connections from the box the host could not open
 *       (refused, unreachable, timed out)
 * END GENERATED: box metrics
 * The counters are the box's shim's, for every process that uses the box,
 * since the box last started; an exec error is a request that never ran
 * (refused, or no such binary, unknown user, missing working directory),
 * not a process that exits non-zero. null: not known (network_* without a
 * network). A box that is not running fails with BOXLITE_ERR_INVALID_STATE. */
int boxlite_box_metrics(boxlite_box_t *box, char **out_json, boxlite_error_t **err);
/* This runtime's counters (this process, since boxlite_runtime_new):
 * BEGIN GENERATED: runtime metrics (from internal/abi.RuntimeMetrics: go generate ./errdefs; do not edit)
 *   "boxes_created_total": integer: the boxes created
 *   "boxes_failed_total": integer: the starts that failed
 *   "num_running_boxes": integer: of the boxes this runtime has handles on
 *   "num_paused_boxes": integer: of those, the paused ones (memory saved to disk, no process)
 *   "total_commands_executed": integer: the exec requests it sent
 *   "total_exec_errors": integer: of those, the ones that never ran, including those whose
 *       connection to the box ended first
 * END GENERATED: runtime metrics
 */
int boxlite_runtime_metrics(boxlite_runtime_t *rt, char **out_json, boxlite_error_t **err);

/* ---- files ---- */

/* Copies a host file or directory into the box (copy_in) or a box path to
 * the host (copy_out), by docker cp's rules: into the destination if it is a
 * directory (or ends in "/"), else to that path as the copy's new name; a
 * source ending in "/." copies a directory's contents. Box paths resolve as
 * in the box (its symlinks too); no tar or shell is needed in the image.
 * Modes, mtimes and symlinks are kept; copied-in files belong to root in
 * the box, copied-out ones to the calling user, without set-id bits. What a
 * box sends is checked: nothing lands outside host_dst or through a symlink,
 * device nodes are not made. Blocks until done. options_json (NULL: all
 * defaults), an object of:
 * BEGIN GENERATED: copy options (from internal/abi.CopyOptions: go generate ./errdefs; do not edit)
 *   "overwrite": boolean: replace an existing destination: default true
 *   "follow_symlinks": boolean: follow a symlink named as the source: default false
 *   "include_parent": boolean: copy a directory itself (false: its contents): default true
 *   "recursive": boolean: false refuses a directory: default true
 *   "layout": string: where a directory lands: "docker" (default: a destination that does not
 *       exist becomes the copy, as docker cp) or "boxlite" (always inside the destination under
 *       its own name, the destination made if missing, as BoxLite 0.10; the Python and Node
 *       SDKs ask for it)
 *   "max_bytes": integer: a cap on file data, limit past it; 0: the default (1073741824 for
 *       copy_out, none for copy_in); -1: none
 *   "max_entries": integer: a cap on entries, limit past it; 0: the default (100000 for
 *       copy_out, none for copy_in); -1: none
 *   "timeout_secs": number: more than 0 (timeout past it); default: none
 * END GENERATED: copy options
 * A missing source is BOXLITE_ERR_NOT_FOUND, an existing destination without
 * "overwrite" BOXLITE_ERR_ALREADY_EXISTS; a box whose agent predates the copy
 * service gives BOXLITE_ERR_UNSUPPORTED. */
int boxlite_box_copy_in(boxlite_box_t *box, const char *host_src, const char *box_dst,
                        const char *options_json, boxlite_error_t **err);
int boxlite_box_copy_out(boxlite_box_t *box, const char *box_src, const char *host_dst,
                         const char *options_json, boxlite_error_t **err);

/* ---- tunnels (BoxLite's box.network.tunnel(port)) ----
 *
 * A tunnel is a TCP connection to a port on the box's own loopback
 * (127.0.0.1 in the box), carried over the box's agent channel: it needs no
 * published port and no network in the box. A box whose agent predates
 * tunnels gives BOXLITE_ERR_UNSUPPORTED, as does a box of a REST runtime;
 * a port outside 1-65535 BOXLITE_ERR_INVALID_ARGUMENT; nothing listening
 * there BOXLITE_ERR_UNREACHABLE. A configured or stopped box is started
 * first, as for exec.
 *
 * Connects and stores in *fd_out a connected stream socket (AF_UNIX,
 * SOCK_STREAM, close-on-exec) that the caller owns and closes: what is
 * written to it reaches the port in the box, what the box sends is read
 * from it; shutdown(fd, SHUT_WR) half-closes the connection in the box,
 * and EOF is read once the box's side has closed or half-closed. Closing
 * the fd resets a connection still open. A tunnel that fails later ends
 * like a closed connection. Poll the fd from an event loop as any socket. */
int boxlite_box_tunnel_connect(boxlite_box_t *box, int port, int *fd_out, boxlite_error_t **err);
/* Listens on listen_json and carries every connection accepted there to
 * port in the box, each over a tunnel of its own, until
 * boxlite_forwarder_close. listen_json, an object of:
 * BEGIN GENERATED: socket address (from internal/abi.SocketAddress: go generate ./errdefs; do not edit)
 *   "type": "tcp" | "unix", required: tcp or unix
 *   "host": string: tcp: a numeric IP address (a name is invalid_argument): default "127.0.0.1"
 *   "port": integer: tcp: 0 to 65535; 0 picks a free port (local_addr says which)
 *   "path": string: unix: an absolute path; the socket file must not exist, and is removed on
 *       close
 * END GENERATED: socket address
 * A Unix path that exists gives BOXLITE_ERR_ALREADY_EXISTS, as does a TCP
 * port in use. */
int boxlite_box_tunnel_forward(boxlite_box_t *box, int port, const char *listen_json,
                               boxlite_forwarder_t **out, boxlite_error_t **err);
/* The address the forwarder listens on, as listen_json (a TCP port 0
 * resolved); free with boxlite_string_free. */
int boxlite_forwarder_local_addr(boxlite_forwarder_t *f, char **out_json, boxlite_error_t **err);
/* Waits until the forwarder has stopped (closed, or its listener failed:
 * then that error) and its connections have ended: timeout_ms as for
 * boxlite_execution_read; BOXLITE_AGAIN while it serves. */
int boxlite_forwarder_wait(boxlite_forwarder_t *f, int64_t timeout_ms, boxlite_error_t **err);
/* Stops listening (a Unix socket's file is removed) and ends the
 * connections it carries. */
int boxlite_forwarder_close(boxlite_forwarder_t *f, boxlite_error_t **err);
/* Frees the handle, closing the forwarder first. */
void boxlite_forwarder_free(boxlite_forwarder_t *f);

/* ---- network policy (BoxLite's network.update_outbound / update_inbound) ----
 *
 * spec_json, an object of:
 * BEGIN GENERATED: network direction (from internal/abi.NetworkDirection: go generate ./errdefs; do not edit)
 *   "mode": "enabled" | "disabled", required
 *   "allow_net": [string]: outbound: where the box may connect, as the flat allow_net; inbound:
 *       must be empty
 * END GENERATED: network direction
 * Outbound: where the box may connect from now on ("enabled" with an empty
 * or absent allow_net: anywhere; "disabled": nothing). A running box's
 * network stack enforces it at once for new connections and DNS names
 * (open connections are kept); the box keeps it across restarts. A running
 * box created without a network cannot gain one (BOXLITE_ERR_UNSUPPORTED;
 * it does at its next start). Inbound: the mode is kept and reported (a
 * local box has no public side); a non-empty allow_net is
 * BOXLITE_ERR_UNSUPPORTED, as in BoxLite. A box of a REST runtime:
 * BOXLITE_ERR_UNSUPPORTED. */
int boxlite_box_update_outbound(boxlite_box_t *box, const char *spec_json, boxlite_error_t **err);
int boxlite_box_update_inbound(boxlite_box_t *box, const char *spec_json, boxlite_error_t **err);

/* ---- snapshots, clones, archives (BoxLite's box.snapshot, clone_box,
 * export, import_box) ----
 *
 * Each works on a box that is not running (stopped, or never started):
 * a running one gives BOXLITE_ERR_INVALID_STATE (stop it first; the disk is
 * only consistent while no VM runs it), as does a box another process is
 * starting. Disks are copied copy-on-write where the host file system
 * reflinks, else sparse: a copy costs the data the disk holds, not its size.
 * A snapshot is, as JSON, an object of:
 * BEGIN GENERATED: snapshot info (from internal/abi.SnapshotInfo: go generate ./errdefs; do not edit)
 *   "id": string
 *   "box_id": string
 *   "name": string
 *   "created_at": integer: unix seconds
 *   "size_bytes": integer: host bytes it takes
 *   "container_disk_bytes": integer: the disk's size; 0 when the box had no disk yet
 *   "memory": boolean: the box's memory is kept too: a restore brings its processes back
 *   "memory_bytes": integer, optional: host bytes of the saved memory; 0 without memory
 * END GENERATED: snapshot info
 * Snapshots live with their
 * box and go when it is removed. Snapshot names: 1-64 of [a-zA-Z0-9_.-],
 * starting with a letter or digit (BOXLITE_ERR_INVALID_ARGUMENT otherwise). */

/* Saves the box's disk as a snapshot; name NULL or "" names it by its id.
 * *out_json: the snapshot. A name in use: BOXLITE_ERR_ALREADY_EXISTS. A
 * running box is saved at one instant: its VM stops for the save and runs
 * on (`sync` runs in the box first, where the image has it). */
int boxlite_box_snapshot_create(boxlite_box_t *box, const char *name, char **out_json,
                                boxlite_error_t **err);
/* boxlite_box_snapshot_create with options_json (NULL: defaults):
 * BEGIN GENERATED: snapshot options
 *   "memory": boolean: keep the box's memory and devices too (a running or paused box):
 *       restoring the snapshot brings the box back paused, its processes as they were
 * END GENERATED: snapshot options
 * With "memory", a stopped box: BOXLITE_ERR_INVALID_STATE; restoring the
 * snapshot (the box stopped or paused) leaves the box paused at that
 * instant, and the next call resumes it with a new boot id and fresh
 * entropy. */
int boxlite_box_snapshot_create_with(boxlite_box_t *box, const char *name, const char *options_json,
                                     char **out_json, boxlite_error_t **err);
/* *out_json: the box's snapshots, a JSON array, newest first. */
int boxlite_box_snapshot_list(boxlite_box_t *box, char **out_json, boxlite_error_t **err);
/* *out_json: the snapshot named name; BOXLITE_ERR_NOT_FOUND if none. */
int boxlite_box_snapshot_get(boxlite_box_t *box, const char *name, char **out_json,
                             boxlite_error_t **err);
int boxlite_box_snapshot_remove(boxlite_box_t *box, const char *name, boxlite_error_t **err);
/* Replaces the box's disk with the snapshot's (the snapshot stays). */
int boxlite_box_snapshot_restore(boxlite_box_t *box, const char *name, boxlite_error_t **err);
/* Makes a new, stopped box with the box's config, image and a copy of its
 * disk (a running box's saved at one instant; a memory snapshot's clone is
 * paused at its instant, a fork of it). *out is a new handle. options_json (NULL: defaults), an object of:
 * BEGIN GENERATED: clone options (from internal/abi.CloneOptions: go generate ./errdefs; do not edit)
 *   "name": string: the clone's name (names are unique: already_exists); default: none
 *   "snapshot": string: copy this snapshot of the box instead of its disk
 * END GENERATED: clone options
 */
int boxlite_box_clone(boxlite_box_t *box, const char *options_json, boxlite_box_t **out,
                      boxlite_error_t **err);
/* Makes running boxes from the running box's state at one instant (its
 * memory, processes and disk; the box is stopped only for the save, then
 * runs on with its streams). Each fork is a machine of its own: clock,
 * entropy, hostname (its name when that is a valid hostname), boot id,
 * machine id, network and host ports; the box's open streams are cancelled
 * in it (a detachable exec, a session's interpreter, runs on there).
 * options_json (NULL: defaults): {"count": 1 (1..64), "names":
 * [] (at most count; the first forks get them)}. *out_json: a JSON array of
 * the forks' ids (boxlite_box_get opens them). A paused box is resumed
 * first; another state but running: BOXLITE_ERR_INVALID_STATE; volumes or a
 * REST runtime: BOXLITE_ERR_UNSUPPORTED. On failure no fork is left. */
int boxlite_box_fork(boxlite_box_t *box, const char *options_json, char **out_json,
                     boxlite_error_t **err);
/* Writes the box to one archive file (a zstd-compressed tar: its config,
 * its disk, sparse, and its image, so it imports where no registry can be
 * reached; volumes are left out). dest: a file, or a directory in which the
 * archive is <name or id>.boxlite. *out_path: the archive's path. A running
 * box's disk is saved at one instant first. */
int boxlite_box_export(boxlite_box_t *box, const char *dest, char **out_path,
                       boxlite_error_t **err);
/* Makes a new, stopped box in this runtime's home from an archive
 * boxlite_box_export wrote, loading its image into the store if missing;
 * name NULL or "" leaves it unnamed. The archive is untrusted: an entry
 * that is not part of a box archive, a link, a digest that does not match,
 * a config that box_create would refuse (or any volume) give
 * BOXLITE_ERR_INVALID_ARGUMENT, sizes past the limits BOXLITE_ERR_LIMIT,
 * and a failed import leaves no box. *out is a new handle. Of the archived
 * config only the content is kept (image, env, entrypoint, cmd, user,
 * working directory); the rest comes from options_json (NULL: all
 * defaults), box_create's options without "image" and "name":
 * {"memory_mib": 256, "auto_remove": false, "ports": [...], ...}. */
int boxlite_runtime_import_box(boxlite_runtime_t *rt, const char *archive_path, const char *name,
                               const char *options_json, boxlite_box_t **out, boxlite_error_t **err);

/* ---- executions ---- */

/* Starts a process; a configured or stopped box is started first (see
 * boxlite_box_start). command_json, an object of:
 * BEGIN GENERATED: command (from internal/abi.Command: go generate ./errdefs; do not edit)
 *   "argv": [string], required: never joined into a shell string; [] runs the box's entrypoint
 *       and cmd
 *   "env": {string: string}: added to the box's
 *   "cwd": string: default: the box's working directory
 *   "user": string: name, uid or uid:gid; default: the box's
 *   "timeout_secs": number: kills the process after that long (exit.timed_out); 0: none
 *   "stdin": boolean: keep stdin open for boxlite_execution_write; default false
 *   "tty": boolean: run on a pseudo-terminal (see below); default false
 *   "rows": integer: with tty: the terminal's rows, default 24
 *   "cols": integer: with tty: the terminal's columns, default 80
 *   "output_limit_bytes": integer: boxlite_box_run only: output kept per stream; default: the
 *       runtime's
 * END GENERATED: command
 * A command that does not exist fails here or in boxlite_execution_wait
 * with BOXLITE_ERR_NOT_FOUND.
 *
 * "tty": true runs the process on a pseudo-terminal of rows x cols (1-65535;
 * "rows"/"cols" need "tty"), leading its own session with the terminal as
 * its controlling terminal, TERM=xterm unless "env" sets it. BOXLITE_STDOUT
 * then carries everything the terminal shows (echoed input, stderr and the
 * \r\n of its output processing included) and BOXLITE_STDERR only ends;
 * boxlite_execution_write types into the terminal (so "\x03" is ^C) and
 * boxlite_execution_close_stdin types its EOF character (^D) instead of
 * closing anything. A box whose agent predates terminals gives
 * BOXLITE_ERR_UNSUPPORTED. */
int boxlite_box_exec(boxlite_box_t *box, const char *command_json, boxlite_execution_t **out,
                     boxlite_error_t **err);
/* Runs a command to completion and collects its output; *out is freed with
 * boxlite_result_free. A timeout is not an error here: see exit.timed_out. */
int boxlite_box_run(boxlite_box_t *box, const char *command_json, boxlite_result_t **out,
                    boxlite_error_t **err);
void boxlite_result_free(boxlite_result_t *res);

/* Reads up to cap bytes of stdout (BOXLITE_STDOUT) or stderr (BOXLITE_STDERR).
 * timeout_ms: 0 never blocks, < 0 waits as long as needed, > 0 at most that
 * long. Returns BOXLITE_OK with *n > 0, BOXLITE_AGAIN when nothing arrived in
 * time, BOXLITE_EOF when the stream has ended. Unread output is bounded: a
 * process whose output is not read blocks, as on a pipe. */
int boxlite_execution_read(boxlite_execution_t *ex, int stream, uint8_t *buf, size_t cap,
                           int64_t timeout_ms, size_t *n, boxlite_error_t **err);
/* A file descriptor that becomes readable when output or the end arrives
 * for a stream, and stays readable while a stream that was read until
 * BOXLITE_AGAIN has something again. Owned by the handle: do not close or
 * read it. -1 on error. */
int boxlite_execution_fd(boxlite_execution_t *ex);
/* Writes all of buf to the process's stdin (needs "stdin": true); blocks
 * while the box's stdin window is full. */
int boxlite_execution_write(boxlite_execution_t *ex, const uint8_t *buf, size_t len,
                            boxlite_error_t **err);
int boxlite_execution_close_stdin(boxlite_execution_t *ex, boxlite_error_t **err);
/* Waits for the exit: timeout_ms as for read; BOXLITE_AGAIN if still running. */
int boxlite_execution_wait(boxlite_execution_t *ex, int64_t timeout_ms, boxlite_exit_t *out,
                           boxlite_error_t **err);
int boxlite_execution_signal(boxlite_execution_t *ex, int signal, boxlite_error_t **err);
int boxlite_execution_kill(boxlite_execution_t *ex, boxlite_error_t **err);
/* Resizes the terminal of a "tty" execution; the process gets SIGWINCH.
 * BOXLITE_ERR_INVALID_STATE for an execution without a terminal or one that
 * has exited, BOXLITE_ERR_INVALID_ARGUMENT for a size outside 1-65535. */
int boxlite_execution_resize(boxlite_execution_t *ex, int rows, int cols, boxlite_error_t **err);
/* The execution's id (12 hex digits); static for the handle's life, do not
 * free. NULL for a stale handle. */
const char *boxlite_execution_id(boxlite_execution_t *ex);
/* Frees the handle; a process still running is killed with its process group. */
void boxlite_execution_free(boxlite_execution_t *ex);

/* ---- sessions: a live Python interpreter or shell in a box ----
 *
 * A "python" session keeps one interpreter running in the box: each
 * boxlite_session_run is a cell that sees the globals, imports and
 * definitions of the cells before it, runs as __main__, and may end with an
 * expression whose repr() is returned (as in a notebook). A "shell" session
 * keeps one sh: the working directory, exported and shell variables and
 * functions of one boxlite_session_exec are there for the next. A code
 * context ("code:python", "code:javascript", "code:bash"; E2B's and
 * Jupyter's contexts) keeps an interpreter whose cells
 * (boxlite_session_run_code) give rich results: MIME bundles of the last
 * expression's value, of display() calls and of matplotlib figures. Calls on one
 * session take turns; a box may have several sessions. A session ends when
 * freed, when its box stops, or with the process. */

typedef struct boxlite_session boxlite_session_t;
typedef struct boxlite_cell boxlite_cell_t; /* a running cell, to stream its output */

/* kind is "python", "shell", or a code context: "code:python", "code:javascript"
 * (node or nodejs on the box's PATH) or "code:bash" (bash, unless "shell"
 * names another). options_json may be NULL or an object of:
 * BEGIN GENERATED: session options (from internal/abi.SessionOptions: go generate ./errdefs; do not edit)
 *   "python": string: python sessions: the interpreter; default: the first of
 *       /usr/local/bin/python3, python3, python in the box
 *   "shell": string: shell sessions: the shell; default "/bin/sh"
 *   "env": {string: string}: added to the box's
 *   "cwd": string: default: the box's working directory
 *   "user": string: name, uid or uid:gid; default: the box's
 *   "grace_secs": number: how long an interrupted cell or command has to stop before its
 *       interpreter or shell is killed and restarted: default 3, more than 0
 *   "output_limit_bytes": integer: output kept per stream of a result; default: the runtime's
 *   "name": string: 1-48 of [A-Za-z0-9_-]: the session's process outlives its client, and a
 *       later session of that kind and name in the box (another process, after a pause, in a
 *       fork) takes it over with its state; local runtimes only
 * END GENERATED: session options
 * Blocks until the session is ready; BOXLITE_ERR_NOT_FOUND when the image
 * has no Python (Node, bash). */
int boxlite_session_new(boxlite_box_t *box, const char *kind, const char *options_json,
                        boxlite_session_t **out, boxlite_error_t **err);

/* Runs code (UTF-8 Python source) as one cell of a python session.
 * *result_json, freed with boxlite_string_free, is an object of:
 * BEGIN GENERATED: cell result (from internal/abi.CellResult: go generate ./errdefs; do not edit)
 *   "stdout": string
 *   "stderr": string
 *   "value": string or null: repr() of the trailing expression
 *   "error": {...} or null: the exception the cell raised
 *     "type": string: e.g. ValueError; InterpreterExited for an interpreter that died under the
 *         cell
 *     "message": string
 *     "traceback": string
 *   "exit_code": integer: what python -c would exit with (0, 1, SystemExit's code)
 *   "timed_out": boolean
 *   "restarted": boolean
 *   "stdout_truncated": boolean: output past the session's output_limit_bytes was dropped
 *   "stderr_truncated": boolean
 * END GENERATED: cell result
 * An exception in the cell is a result ("error"), not a failure; so is an
 * interpreter that died under the cell (error type "InterpreterExited",
 * "restarted": true; the session starts a new one, its state is gone).
 * options_json: NULL or an object of:
 * BEGIN GENERATED: cell options (from internal/abi.CellOptions: go generate ./errdefs; do not edit)
 *   "timeout_secs": number: interrupts the cell after that long (KeyboardInterrupt); 0: none
 * END GENERATED: cell options
 * A timeout interrupts the cell and returns BOXLITE_ERR_TIMEOUT; the session
 * keeps its state. A cell that does not stop within the grace period is
 * killed with its interpreter, which is restarted: BOXLITE_ERR_TIMEOUT, a
 * message saying the session's state is gone, and "restarted": true. With BOXLITE_ERR_TIMEOUT *result_json is set
 * too (what the cell wrote until then); with other errors it is NULL. */
int boxlite_session_run(boxlite_session_t *s, const char *code, const char *options_json,
                        char **result_json, boxlite_error_t **err);

/* Starts a cell and returns at once, to stream its output; options_json
 * (NULL: none) as for boxlite_session_run, its timeout over the whole cell. */
int boxlite_session_run_start(boxlite_session_t *s, const char *code, const char *options_json,
                              boxlite_cell_t **out, boxlite_error_t **err);
/* Reads output of the cell in the order it was written; *stream is
 * BOXLITE_STDOUT or BOXLITE_STDERR. timeout_ms as for boxlite_execution_read:
 * BOXLITE_OK with *n > 0, BOXLITE_AGAIN, or BOXLITE_EOF once the cell has
 * ended and all its output was read. Unread output is bounded (1 MiB): a
 * cell whose output is not read waits, as on a pipe, until read or until
 * boxlite_cell_result is called. */
int boxlite_cell_read(boxlite_cell_t *c, uint8_t *buf, size_t cap, int64_t timeout_ms,
                      int *stream, size_t *n, boxlite_error_t **err);
/* A file descriptor that becomes readable when output or the end arrives (as
 * boxlite_execution_fd). Owned by the handle. -1 on error. */
int boxlite_cell_fd(boxlite_cell_t *c);
/* Waits for the cell to end (timeout_ms as for boxlite_execution_wait:
 * BOXLITE_AGAIN while it runs) and returns what boxlite_session_run does,
 * with the output boxlite_cell_read did not return. */
int boxlite_cell_result(boxlite_cell_t *c, int64_t timeout_ms, char **result_json,
                        boxlite_error_t **err);
/* Interrupts the cell now (KeyboardInterrupt), as its timeout would. */
int boxlite_cell_interrupt(boxlite_cell_t *c, boxlite_error_t **err);
/* Frees the handle; a cell still running is interrupted, its output dropped. */
void boxlite_cell_free(boxlite_cell_t *c);

/* Runs a command in a shell session. command_json, an object of:
 * BEGIN GENERATED: shell command (from internal/abi.ShellCommand: go generate ./errdefs; do not edit)
 *   "argv": [string], required: each argument quoted as one word, never joined into a script; a
 *       builtin such as cd or export, or eval SCRIPT for shell code, acts on the session's
 *       shell
 *   "env": {string: string}: this command only: it then runs in a subshell
 *   "timeout_secs": number: sends SIGINT after that long; 0: none
 *   "output_limit_bytes": integer: output kept per stream; default: the session's
 * END GENERATED: shell command
 * The command's stdin is /dev/null. *out as
 * for boxlite_box_run. A timeout sends SIGINT to the command and returns
 * BOXLITE_ERR_TIMEOUT with *out set (exit.timed_out = 1), the shell keeping
 * its state; a command that ignores it is killed with the shell, which is
 * restarted (the message says so). */
int boxlite_session_exec(boxlite_session_t *s, const char *command_json, boxlite_result_t **out,
                         boxlite_error_t **err);

/* Runs code as one cell of a code context ("code:..." session): its
 * declarations stay for the next cell. options_json: NULL or an object of:
 * BEGIN GENERATED: code options (from internal/abi.CodeOptions: go generate ./errdefs; do not edit)
 *   "timeout_secs": number: interrupts the cell after that long (KeyboardInterrupt, SIGINT); 0:
 *       none
 *   "env": {string: string}: set in the interpreter's environment for this cell only
 * END GENERATED: code options
 * *execution_json, freed with boxlite_string_free, is an object of:
 * BEGIN GENERATED: code execution (from internal/abi.CodeExecution: go generate ./errdefs; do not edit)
 *   "results": [{...}]: the last expression's value (is_main_result), display() calls and
 *       matplotlib figures, in order
 *     "is_main_result": boolean: the value of the cell's last expression
 *     "data": {string: string}: MIME type to representation: text/plain, text/html,
 *         text/markdown, image/svg+xml, text/latex, application/javascript as text; image/png,
 *         image/jpeg, application/pdf in base64; application/json as JSON text
 *   "logs": {...}
 *     "stdout": [string]
 *     "stderr": [string]
 *     "stdout_truncated": boolean: output past the session's output_limit_bytes was dropped
 *     "stderr_truncated": boolean
 *   "error": {...} or null: what the cell raised; null when it completed
 *     "name": string: the exception's class (ZeroDivisionError, TypeError); ExitCode for a bash
 *         cell that exited non-zero
 *     "value": string: its message (a bash cell's exit code)
 *     "traceback": string
 *   "execution_count": integer: the cells of the context, from 1 (a reset starts again)
 *   "results_truncated": boolean: results past the session's output_limit_bytes were dropped
 *   "restarted": boolean: the interpreter ended under the cell and was started again: the state
 *       is gone
 *   "timed_out": boolean
 * END GENERATED: code execution
 * An exception in the cell is its "error", not a failure. A timeout
 * interrupts the cell and returns BOXLITE_ERR_TIMEOUT with *execution_json
 * set ("timed_out": true); the context keeps its state unless the cell
 * ignored the interrupt ("restarted": true). With other errors
 * *execution_json is NULL. */
int boxlite_session_run_code(boxlite_session_t *s, const char *code, const char *options_json,
                             char **execution_json, boxlite_error_t **err);

/* Interrupts the cell or command running on the session now, as its timeout
 * would (KeyboardInterrupt, or SIGINT to the command; killed and restarted
 * after the grace period if it does not stop). The interrupted call returns
 * BOXLITE_ERR_TIMEOUT. Nothing happens when the session is idle. */
int boxlite_session_interrupt(boxlite_session_t *s, boxlite_error_t **err);
/* Starts a fresh interpreter or shell: all state is gone. A cell or command
 * still running ends with BOXLITE_ERR_CLOSED. */
int boxlite_session_reset(boxlite_session_t *s, boxlite_error_t **err);
/* *out_json, an object of:
 * BEGIN GENERATED: session info (from internal/abi.SessionInfo: go generate ./errdefs; do not edit)
 *   "kind": "python" | "shell" | "code:python" | "code:javascript" | "code:bash"
 *   "pid": integer: in the box
 *   "restarts": integer
 *   "python": string, optional: the interpreter's version (python sessions)
 * END GENERATED: session info
 */
int boxlite_session_info(boxlite_session_t *s, char **out_json, boxlite_error_t **err);
/* Ends the session (its interpreter or shell) and frees the handle; a call
 * still running on it fails with BOXLITE_ERR_CLOSED. NULL is a no-op. */
void boxlite_session_free(boxlite_session_t *s);

#ifdef __cplusplus
}
#endif
#endif /* BOXLITE_H */
