// Types of the boxlite package: BoxLite's Node API over libboxlite.so.

// BEGIN GENERATED: error codes (go generate ./errdefs; do not edit)
/** The library's stable error kinds (the C ABI's boxlite_status_name of each error). */
export type BoxliteErrorCode =
  | 'invalid_argument'
  | 'not_found'
  | 'already_exists'
  | 'invalid_state'
  | 'timeout'
  | 'unsupported'
  | 'boot_failed'
  | 'closed'
  | 'limit'
  | 'internal'
  | 'unreachable';
// END GENERATED: error codes

export declare const ERROR_CODES: readonly BoxliteErrorCode[];

/** Base class of every error the SDK raises (bad argument types are TypeError / RangeError). */
export declare class BoxliteError extends Error {
  constructor(message: string, options?: { code?: BoxliteErrorCode; cause?: unknown });
  /** The library's error kind; undefined for errors of the SDK itself (e.g. ExecError). */
  readonly code?: BoxliteErrorCode;
}

/** A command failed with a non-zero exit code (CodeBox.run, installPackage). */
export declare class ExecError extends BoxliteError {
  constructor(command: string, exitCode: number, stderr: string, options?: { stdout?: string; code?: BoxliteErrorCode; cause?: unknown });
  readonly command: string;
  readonly exitCode: number;
  readonly stderr: string;
  readonly stdout?: string;
}

/** An operation or a command ran out of time; code "timeout". Command timeouts keep what was output. */
export declare class TimeoutError extends BoxliteError {
  constructor(message: string, options?: { command?: string; exitCode?: number; stdout?: string; stderr?: string; cause?: unknown });
  readonly command?: string;
  readonly exitCode?: number;
  readonly stdout?: string;
  readonly stderr?: string;
  /** A session cell's timeout: the cell's result so far. */
  readonly result?: CellResult;
  /** A session cell's timeout: the cell ignored the interrupt, so the interpreter was restarted (its state is gone). */
  readonly restarted?: boolean;
}

export declare class ParseError extends BoxliteError {}

/** The library's error kind of err, or undefined. */
export declare function errorCode(err: unknown): BoxliteErrorCode | undefined;

/** The library version, "MAJOR.MINOR.PATCH". */
export declare function version(): string;

/**
 * A credential the box uses without holding it (BoxLite's Secret): the box
 * sees its placeholder (env BOXLITE_SECRET_<NAME>), the host puts the value
 * in HTTPS requests to its hosts ("name", "*.wildcard", optionally ":port",
 * default 443). See docs/secrets.md.
 */
export declare class Secret {
  constructor(options: { name: string; value: string; hosts?: string[]; placeholder?: string });
  readonly name: string;
  /** Not enumerable: left out of console.log and JSON.stringify. */
  readonly value: string;
  readonly hosts: string[];
  readonly placeholder: string;
  /** What the box sees: default "<BOXLITE_SECRET:NAME>". */
  getPlaceholder(): string;
  /** The environment variable the box finds the placeholder in. */
  envKey(): string;
}
export { Secret as JsSecret };

// BoxLite 0.10's advanced box options, health status and registry settings.
import type { JsHealthStatus, JsImageRegistry } from './advanced';
export * from './advanced';


// The library's defaults and limits (the C header's BOXLITE_* macros).
// BEGIN GENERATED: defaults (go generate ./errdefs; do not edit)
/** a box's guest memory */
export declare const DEFAULT_MEMORY_MIB: 512;
/** the least guest memory a box may have */
export declare const MIN_MEMORY_MIB: 64;
/** the most guest memory a box may have */
export declare const MAX_MEMORY_MIB: 65536;
/** a box's virtual CPUs */
export declare const DEFAULT_CPUS: 1;
/** the fewest virtual CPUs a box may have */
export declare const MIN_CPUS: 1;
/** the most virtual CPUs a box may have */
export declare const MAX_CPUS: 64;
/** a box's writable disk (sparse: it costs what the box writes) */
export declare const DEFAULT_DISK_SIZE_GB: 4;
/** the smallest writable disk a box may have */
export declare const MIN_DISK_SIZE_GB: 1;
/** the largest writable disk a box may have */
export declare const MAX_DISK_SIZE_GB: 1024;
/** how long a start may take until the box's agent answers */
export declare const DEFAULT_BOOT_TIMEOUT_SECS: 60;
/** the longest boot timeout a box may ask for */
export declare const MAX_BOOT_TIMEOUT_SECS: 600;
/** the longest idle period before a box pauses itself (auto_pause_secs) */
export declare const MAX_AUTO_PAUSE_SECS: 2592000;
/** output collected per stream of a run, a cell or a shell command */
export declare const DEFAULT_OUTPUT_LIMIT_BYTES: 67108864;
/** a terminal's initial rows */
export declare const DEFAULT_ROWS: 24;
/** a terminal's initial columns */
export declare const DEFAULT_COLS: 80;
/** how long an interrupted cell or shell command has to stop before its session restarts */
export declare const DEFAULT_SESSION_GRACE_SECS: 3;
/** the file data a copy out of a box may bring unless its options say otherwise */
export declare const DEFAULT_COPY_OUT_MAX_BYTES: 1073741824;
/** the entries a copy out of a box may bring unless its options say otherwise */
export declare const DEFAULT_COPY_OUT_MAX_ENTRIES: 100000;
/** the most secrets a box may have */
export declare const MAX_SECRETS: 32;
/** the longest value a secret may have */
export declare const MAX_SECRET_VALUE_BYTES: 16384;
/** between a box's health checks */
export declare const DEFAULT_HEALTH_INTERVAL_SECS: 30;
/** how long a health check may take to pass */
export declare const DEFAULT_HEALTH_TIMEOUT_SECS: 10;
/** failed health checks in a row that make a box unhealthy */
export declare const DEFAULT_HEALTH_RETRIES: 3;
/** how long after a box is ready its failed health checks do not count */
export declare const DEFAULT_HEALTH_START_PERIOD_SECS: 60;
/** open files of every box process under the maximum security preset */
export declare const SECURITY_MAXIMUM_MAX_OPEN_FILES: 1024;
/** the largest file a box process may write under the maximum security preset */
export declare const SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES: 1073741824;
/** processes of a box user (root exempt) under the maximum security preset */
export declare const SECURITY_MAXIMUM_MAX_PROCESSES: 100;
/** a box is removed when it stops unless its options say otherwise */
export declare const DEFAULT_AUTO_REMOVE: true;
// END GENERATED: defaults

// ---- runtime ----

export interface JsOptions {
  /** Home directory of images and boxes. Default: $BOXLITE_HOME, else ~/.boxlite. */
  homeDir?: string;
  /** Where boxlite-shim and guest/ are. Default: $BOXLITE_ASSETS, else beside libboxlite.so (inside this package). */
  assets?: string;
  /** Bytes of output collected per stream of a command run to completion (SimpleBox.exec, Box.run, CodeBox.run, InteractiveBox.exec). Default 64 MiB. */
  outputLimitBytes?: number;
  /** MiB of guest memory this runtime's running boxes may hold together: a start or resume past it pauses the least recently used idle boxes first, else fails (limit_exceeded). Default 0: no cap. */
  runningMemoryCapMib?: number;
  /** Boxes kept started and idle, per shape (box: create's options; volumes, ports, secrets, detach and a name cannot be pooled): a create of that shape is handed one at once. Default: none. */
  warmPools?: Array<{ size: number; box: JsBoxOptions }>;
  /** MiB of guest memory all warm pools' boxes may hold together. Default 0: no bound. */
  warmPoolMemoryMib?: number;
  /** How pulls reach registries (BoxLite's): a host alone is a search registry. */
  imageRegistries?: Array<JsImageRegistry | string>;
}


export type EnvInput = Record<string, string> | Array<{ key: string; value: string }> | Array<[string, string]>;

// The option and info types generated from internal/abi (types.d.ts).
import type { BoxConfig, BoxNetworkInfo, BoxRuntimeInfo, JsBoxOptions, NetworkDirectionSpec, NetworkInfo, PortMapping, Volume } from './types';
export * from './types';

/** A box's info in BoxLite's JsBoxInfo shape: its config's fields (BoxConfig, defaults applied) and its state. */
export interface JsBoxInfo extends Omit<BoxConfig, 'image' | 'name' | 'network' | 'ports' | 'env' | 'prestart' | 'volumes'> {
  id: string;
  name?: string;
  image: string;
  /** "configured" (created, never started) | "starting" | "running" | "paused" | "stopping" | "stopped" | "removed" */
  status: string;
  state: { status: string; running: boolean; pid?: number };
  createdAt: string;
  /** When the VM became ready (RFC 3339; BoxLite's startedAt); undefined unless running. */
  startedAt?: string;
  /** The later of startedAt and the last exec, copy or session call this process saw (RFC 3339); undefined unless running. */
  lastActivityAt?: string;
  /** BoxLite's autoDelete: 1 when the box is deleted at stop (autoRemove), else 0. */
  autoDelete: number;
  env: Record<string, string>;
  /** The sessions the box asked to find started (BoxOptions.prestart). */
  prestart: string[];
  volumes: Volume[];
  /** Why the box last stopped. */
  lastExit?: string;
  /** The last run ended in a fault (crashed VMM, protocol violation): exec does not start the box again, start() does. */
  faulted: boolean;
  /** 'enabled' or 'disabled', as configured. */
  networkMode: 'enabled' | 'disabled';
  /** BoxLite's network info (outbound, inbound, mode, allowNet, publishedPorts), with guestIp, gatewayIp and ports as bound while the box runs with a NIC. */
  network: BoxNetworkInfo & Partial<NetworkInfo>;
  /** The published ports as bound (host ports picked); empty when not running. */
  ports: PortMapping[];
  /** Only while running: acceleration (and why), boot timings, pids. */
  runtime?: BoxRuntimeInfo;
  dir: string;
  /** BoxLite's: the health check's state ('None' without one, or when not running). */
  healthStatus: JsHealthStatus;
}

/**
 * A runtime's own counters (this process, since it opened). An exec error is
 * an exec that never ran: refused, or answered with an error instead of
 * starting (no such binary, unknown user, missing cwd); a non-zero exit is not.
 */
export interface RuntimeMetrics {
  /** Boxes create() made. */
  boxesCreatedTotal: number;
  /** Starts (by create or start) that failed. */
  boxesFailedTotal: number;
  /** Boxes this runtime has handles on that are running now. */
  numRunningBoxes: number;
  /** Boxes this runtime has handles on that are paused (memory on disk, no process). */
  numPausedBoxes: number;
  /** Exec requests this runtime sent, to any box. */
  totalCommandsExecuted: number;
  /** Of those, the ones that never ran (also: the box connection ended first). */
  totalExecErrors: number;
}

/**
 * A running box's metrics. Counters are kept by the box's shim, for every
 * process that uses the box, since it last started. null: not known.
 * Durations in milliseconds.
 */
export interface BoxMetrics {
  /** Exec requests from every client of the box. */
  commandsExecutedTotal: number;
  /** Of those, the ones that never ran. */
  execErrorsTotal: number;
  /** Stdin bytes sent to the box's execs. */
  bytesSentTotal: number;
  /** Stdout and stderr bytes of its execs (file copies not included). */
  bytesReceivedTotal: number;
  /** VMM start to agent ready, host clock. */
  guestBootDurationMs: number;
  /** The last start by this library, start to ready: the stages below but container init. */
  totalCreateDurationMs: number | null;
  /** Find the image in the store. */
  stageImagePrepareMs: number | null;
  /** Make the image's layers into the guest's root disks (cached per image). */
  stageGuestRootfsMs: number | null;
  /** Make the box's writable disk (first start), clear its directory. */
  stageFilesystemSetupMs: number | null;
  /** Write the shim's configuration. */
  stageBoxConfigMs: number | null;
  /** Wait for a boot slot. */
  stageBootQueueMs: number | null;
  /** Shim start to ready, including the guest's boot. */
  stageBoxSpawnMs: number | null;
  /** The guest agent's own setup, by the guest's clock. */
  stageContainerInitMs: number | null;
  /** The VMM's CPU since the shim's latest sample at least 1 s old (taken when asked), percent of one host CPU (up to 100 per vCPU). */
  cpuPercent: number | null;
  /** The VMM's resident memory. */
  memoryBytes: number | null;
  /** Network bytes host to guest (null without a network). */
  networkBytesSent: number | null;
  /** Network bytes guest to host. */
  networkBytesReceived: number | null;
  /** TCP connections opened. */
  networkTcpConnections: number | null;
  /** BoxLite's failed TCP connections: not measured here, always null. */
  networkTcpErrors: number | null;
}

/** An image in the store: BoxLite 0.10's ImageInfo fields and ours. */
export interface ImageInfo {
  /** canonical, e.g. docker.io/library/alpine:latest */
  name: string;
  /** the manifest's, sha256:... */
  digest: string;
  /** bytes of its layers as stored (also sizeBytes, size_bytes) */
  size: number;
  sizeBytes: number;
  /** BoxLite's: the name, its repository (docker.io/library/alpine) and tag, the digest as id, when it reached the store (RFC 3339) */
  reference: string;
  repository: string;
  tag: string;
  id: string;
  cachedAt: string;
  [key: string]: unknown;
}

/** What images.pull fetched (BoxLite's ImagePullResult); configDigest is the manifest digest here. */
export interface ImagePullResult {
  reference: string;
  configDigest: string;
  layerCount: number;
}

/** Every build held under an image name (BoxLite's ImageDetail); curated is always false locally. */
export interface ImageDetail {
  name: string;
  tags: string[];
  curated: boolean;
  versions: Array<{ digest: string; sizeBytes: number; sourceRef: string; recordedAt: string }>;
}

/** An API key (boxlite serve key create), sent as Authorization: Bearer; never shown. */
export declare class ApiKeyCredential {
  constructor(key: string);
  /** The key in $BOXLITE_API_KEY. */
  static fromEnv(): ApiKeyCredential;
  /** The bearer token: the key itself. */
  getToken(): string;
}

/** Options of BoxliteRestOptions. */
export interface JsBoxliteRestOptions {
  /** http or https; plain http only to a loopback host unless insecureHttp. */
  url: string;
  /** Required by boxlite serve. */
  credential?: ApiKeyCredential | null;
  /** BoxLite cloud's routing slot: boxlite serve has none ('unsupported' if given). */
  pathPrefix?: string | null;
  /** As JsOptions.outputLimitBytes. */
  outputLimitBytes?: number | null;
  /** Plain http beyond loopback (a TLS proxy in front). */
  insecureHttp?: boolean;
}

/** Where a REST server is and how to authenticate (JsBoxlite.rest). */
export declare class BoxliteRestOptions {
  constructor(options: JsBoxliteRestOptions);
  /** From $BOXLITE_REST_URL (required), $BOXLITE_API_KEY and $BOXLITE_REST_PATH_PREFIX. */
  static fromEnv(): BoxliteRestOptions;
  readonly url: string;
  readonly credential: ApiKeyCredential | null;
  readonly pathPrefix: string | null;
  readonly outputLimitBytes: number | null;
  readonly insecureHttp: boolean;
}

export declare class JsBoxlite implements AsyncDisposable {
  constructor(options?: JsOptions);
  /**
   * A runtime whose boxes live on a server of BoxLite's REST API (boxlite
   * serve). What names this machine's files for the server (loadImage,
   * importBox, volumes, ports) rejects with 'unsupported'.
   */
  static rest(options: BoxliteRestOptions): JsBoxlite;
  /** The process-wide default runtime. */
  static withDefaultConfig(): JsBoxlite;
  /** Sets the default runtime's options (before it is used). */
  static initDefault(options: JsOptions): void;
  /** Output collected per stream of a command run to completion (JsOptions.outputLimitBytes, default 64 MiB). */
  readonly outputLimitBytes: number;
  readonly images: {
    load(path: string): Promise<ImageInfo[]>;
    list(): Promise<ImageInfo[]>;
    pull(reference: string): Promise<ImagePullResult>;
    get(name: string): Promise<ImageDetail>;
    remove(name: string): Promise<void>;
  };
  /** Creates a box, configured, not booted: box.start() (or its first exec, copy or session) boots it. */
  create(options: JsBoxOptions, name?: string | null): Promise<JsBox>;
  get(idOrName: string): Promise<JsBox | null>;
  getOrCreate(options: JsBoxOptions, name?: string | null): Promise<{ created: boolean; box: JsBox }>;
  getInfo(idOrName: string): Promise<JsBoxInfo | null>;
  listInfo(): Promise<JsBoxInfo[]>;
  remove(idOrName: string, force?: boolean): Promise<void>;
  /**
   * A new, stopped box from an archive JsBox.export wrote (its image loaded
   * into this home if missing); name null leaves it unnamed. The archive is
   * checked as untrusted: a bad one rejects ('invalid_argument', 'limit') and leaves no box.
   */
  /** options: box options but image and name (the archive's content is kept; the rest is these, else the defaults). */
  importBox(archivePath: string, name?: string | null, options?: Omit<JsBoxOptions, 'image' | 'name'>): Promise<JsBox>;
  /** Imports an OCI layout directory or a docker-archive tar. */
  loadImage(path: string): Promise<ImageInfo[]>;
  pullImage(reference: string): Promise<ImagePullResult>;
  getImage(name: string): Promise<ImageDetail>;
  removeImage(name: string): Promise<void>;
  listImages(): Promise<ImageInfo[]>;
  /** This runtime's counters since it opened. */
  metrics(): Promise<RuntimeMetrics>;
  /** Stops the boxes this runtime started (not detached ones) and releases it. */
  close(): Promise<void>;
  /** BoxLite's shutdown: close(), waiting at most timeout seconds (boxes still stopping then finish in the background). */
  shutdown(timeout?: number | null): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
export { JsBoxlite as Boxlite };

// ---- boxes and executions ----

export interface ExecOptions {
  cwd?: string;
  user?: string;
  /** Kill the process after this many seconds (TERM, then KILL). */
  timeoutSecs?: number;
  timeoutMs?: number;
  /** Same as timeoutSecs. */
  timeout?: number;
  /**
   * Collected output kept per stream; the rest is read and dropped (stdoutTruncated /
   * stderrTruncated). Default: the runtime's outputLimitBytes (64 MiB). Not for Box.exec,
   * whose Execution streams everything.
   */
  outputLimitBytes?: number;
  /**
   * Run on a terminal in the box: stdout carries all it shows (echo included), stderr stays
   * empty, stdin types into it. Default false.
   */
  tty?: boolean;
  /** The terminal's size with tty (1-65535); default 24 x 80. */
  rows?: number;
  cols?: number;
}

export interface BoxExecOptions extends ExecOptions {
  cmd?: string;
  args?: string[];
  /** The whole command line instead of cmd + args. */
  argv?: string[];
  env?: EnvInput;
  /** Keep stdin open for writing. Default true. */
  stdin?: boolean;
}

export interface ExitStatus {
  /** -N when signal N ended the process (as in BoxLite). */
  exitCode: number;
  signal: number;
  /** The command's timeout ended it. */
  timedOut: boolean;
  /** Why the process ended abnormally (BoxLite's JsExecResult.errorMessage): set when its timeout killed it. */
  errorMessage?: string;
}

export interface RunResult extends ExitStatus {
  stdout: Buffer;
  stderr: Buffer;
  /** The stream was longer than the output limit: it holds the first outputLimitBytes only. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

/** BoxLite's CopyOptions for copyIn / copyOut (BoxLite 0.10's layout unless layout: 'docker'). */
export interface CopyOptions {
  /** Default true; false refuses a directory source. */
  recursive?: boolean;
  /** Default true; false fails with code 'already_exists' when the destination exists. */
  overwrite?: boolean;
  /** Default false; true copies what a symlink named as the source points to. */
  followSymlinks?: boolean;
  /** Default true; false copies a directory's contents (as a source ending in "/." does). */
  includeParent?: boolean;
  /** Caps on file data and entries (code 'limit'); default for copyOut 1 GiB and 100,000, for copyIn none; null: no cap. */
  maxBytes?: number | null;
  maxEntries?: number | null;
  timeoutSecs?: number;
  /** Where a directory lands: 'boxlite' (default: inside the destination under its own name, the destination made if missing) or 'docker' (a missing destination becomes the copy). */
  layout?: 'boxlite' | 'docker';
}

/** A snapshot of a box's disk (BoxLite's JsSnapshotInfo). */
export interface JsSnapshotInfo {
  id: string;
  boxId: string;
  name: string;
  /** Unix seconds. */
  createdAt: number;
  /** The disk's size; 0 when the box had no disk yet (never started). */
  containerDiskBytes: number;
  /** Bytes the snapshot takes on the host (sparse or copy-on-write). */
  sizeBytes: number;
  /** The snapshot keeps the box's memory (restore brings its processes back). */
  memory: boolean;
  /** Host bytes of the saved memory; 0 without memory. */
  memoryBytes: number;
}

/** Options of snapshot.create (none yet, as in BoxLite). */
/** Options of snapshot.create: memory keeps the running or paused box's memory too. */
export interface JsSnapshotOptions {
  memory?: boolean | null;
}
/** Options of cloneBox: snapshot clones that snapshot of the box instead of its disk as it is. */
export interface JsCloneOptions {
  snapshot?: string | null;
}
/** Options of export (none yet, as in BoxLite). */
export type JsExportOptions = Record<string, never>;

/**
 * box.snapshot: snapshots of the box's disk, kept with the box. Each call
 * needs the box not running (stopped, or never started), else it rejects
 * with code 'invalid_state'. Names: 1-64 of [a-zA-Z0-9_.-], starting with a letter or digit.
 */
export declare class JsSnapshotHandle {
  /** Saves the disk as snapshot name (null: named by its id); 'already_exists' if taken. */
  create(name?: string | null, options?: JsSnapshotOptions | null): Promise<JsSnapshotInfo>;
  /** Newest first. */
  list(): Promise<JsSnapshotInfo[]>;
  get(name: string): Promise<JsSnapshotInfo | null>;
  remove(name: string): Promise<void>;
  /** Replaces the box's disk with the snapshot's (the snapshot stays). */
  restore(name: string): Promise<void>;
}
export { JsSnapshotHandle as SnapshotHandle };

/** What box.pause() saved. */
export interface PauseInfo {
  /** RFC 3339 time of the save. */
  savedAt: string;
  /** The saved state's size on disk. */
  stateBytes: number;
  /** VM stopped to state synced, in milliseconds. */
  saveMs: number;
}

/** Where a tunnel forwarder listens (BoxLite's SocketAddress): a numeric IP (port 0 picks one) or an absolute Unix path. */
export type SocketAddress = { type: 'tcp'; host?: string; port: number } | { type: 'unix'; path: string };

/** A connection to a port in the box (BoxLite's NativeBoxConnection). */
export declare class BoxConnection {
  readonly port: number;
  /** The socket under it (allowHalfOpen), for code that wants a stream. */
  readonly socket: import('net').Socket;
  /** Up to maxBytes (default 65536); an empty Buffer once the box's side has closed or half-closed. */
  read(maxBytes?: number): Promise<Buffer>;
  write(data: Buffer | Uint8Array | string): Promise<number>;
  /** Half-closes: the box's side reads EOF and can still answer. */
  shutdownWrite(): Promise<void>;
  close(): Promise<void>;
}

/** A listener on this host carrying each connection to a port in the box. */
export declare class TunnelForwarder {
  readonly port: number;
  localAddr(): SocketAddress;
  /** Resolves once closed; rejects when its listener failed. */
  wait(): Promise<void>;
  close(): Promise<void>;
}

/** A prepared one-shot tunnel: connect() or forward(), once. */
export declare class BoxTunnel {
  /** null: a local box has no public URL. */
  uri(): string | null;
  connect(): Promise<BoxConnection>;
  forward(listen: SocketAddress): Promise<TunnelForwarder>;
}

/** box.network: tunnels to TCP ports on the box's loopback, over the agent channel (no network needed in the box). */
export declare class NetworkHandle {
  tunnel(port: number): Promise<BoxTunnel>;
  /** Replaces where the box may connect; a running box's stack enforces it at once. */
  updateOutbound(spec: NetworkDirectionSpec): Promise<void>;
  /** Replaces the inbound mode; a non-empty allowNet is 'unsupported'. */
  updateInbound(spec: NetworkDirectionSpec): Promise<void>;
  /** A local box has no public access to withdraw: checks the port, does nothing. */
  revokeTunnel(port: number): Promise<void>;
}

export declare class JsBox implements AsyncDisposable {
  readonly id: string;
  readonly name: string | null;
  info(): Promise<JsBoxInfo>;
  /** BoxLite's positional form: exec(cmd, args?, env?, tty?, user?, timeoutSecs?, cwd?). stdin is open. */
  exec(cmd: string, args?: string[], env?: EnvInput | null, tty?: boolean, user?: string, timeoutSecs?: number, cwd?: string): Promise<JsExecution>;
  exec(options: BoxExecOptions): Promise<JsExecution>;
  /** Runs to completion on the C ABI's boxlite_box_run. */
  run(argv: string[], options?: ExecOptions & { env?: EnvInput }): Promise<RunResult>;
  /** Copies a host file or directory into the box (BoxLite's layout unless options.layout is 'docker'); no tar needed in the image. */
  copyIn(hostPath: string, containerDest: string, options?: CopyOptions): Promise<void>;
  /** Copies a box path to the host (BoxLite's layout unless options.layout is 'docker'); what the box sends is checked as hostile. */
  copyOut(containerSrc: string, hostDest: string, options?: CopyOptions): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  remove(force?: boolean): Promise<void>;
  /** The running box's metrics; rejects with code 'invalid_state' when it is not running. */
  metrics(): Promise<BoxMetrics>;
  /** Saves the running box with its memory and ends its processes (status "paused"); a paused box: no-op. */
  pause(): Promise<PauseInfo>;
  /** Restores a paused box (a running one: no-op); exec, copies and sessions resume it themselves. */
  resume(): Promise<void>;
  /** Snapshots of the box's disk. */
  readonly snapshot: JsSnapshotHandle;
  /** Tunnels to ports in the box. */
  readonly network: NetworkHandle;
  /** Prepares a one-shot tunnel to a TCP port inside the box. */
  tunnel(port: number): Promise<BoxTunnel>;
  /** A new, stopped box with this box's config, image and a copy of its disk (copy-on-write or sparse); the box must not be running. */
  cloneBox(options?: JsCloneOptions | null, name?: string | null): Promise<JsBox>;
  /** Writes the box (not running) to one archive (config, sparse disk, image); dest is a file or a directory (then <name or id>.boxlite). Resolves to the archive's path. */
  export(dest: string, options?: JsExportOptions | null): Promise<string>;
  /** count (1..64) running boxes made from this running box at one instant (memory, processes, disk), each a machine of its own; names name the first forks. */
  fork(count?: number, names?: string[]): Promise<JsBox[]>;
  /** Releases this handle; the box keeps running. */
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}
export { JsBox as Box };

/** One output stream. Also callable: `await execution.stdout()` resolves to it (BoxLite's API). */
export interface OutputStream extends AsyncIterable<string> {
  (): Promise<OutputStream>;
  /** The next line with its newline (the last may lack it); null at the end. */
  next(): Promise<string | null>;
  /** String chunks as they arrive (UTF-8, never split inside a character). */
  [Symbol.asyncIterator](): AsyncIterator<string>;
  /** Buffer chunks as they arrive. */
  buffers(): AsyncIterable<Buffer>;
  text(): Promise<string>;
  readAll(): Promise<Buffer>;
}

/** Stdin of a process. Also callable: `await execution.stdin()` resolves to it. */
export interface StdinWriter {
  (): Promise<StdinWriter>;
  write(data: Buffer | Uint8Array | string): Promise<void>;
  writeString(text: string): Promise<void>;
  close(): Promise<void>;
  end(): Promise<void>;
}

export declare class JsExecution implements Disposable, AsyncDisposable {
  readonly argv: string[];
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly stdin: StdinWriter;
  /** The execution's id (12 hex digits). */
  id(): Promise<string>;
  wait(): Promise<ExitStatus>;
  kill(): Promise<void>;
  signal(sig: number | NodeJS.Signals): Promise<void>;
  /** Resizes the terminal of a tty execution (the process gets SIGWINCH); code "invalid_state" without one. */
  resizeTty(rows: number, cols: number): Promise<void>;
  /** Same as resizeTty. */
  resize(rows: number, cols: number): Promise<void>;
  closeStdin(): Promise<void>;
  /** Abandons the execution: kills it if running; pending reads and waits reject with code "closed". */
  close(): void;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}
export { JsExecution as Execution };

// ---- convenience boxes ----

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** stdout was longer than the output limit (outputLimitBytes, default 64 MiB): it holds the first bytes only; the rest was read and dropped. Not an error. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** The command's timeout killed it (exitCode -15, or -9 past the grace period); absent otherwise. */
  timedOut?: boolean;
  /** Why the command ended abnormally (its timeout); absent otherwise. */
  errorMessage?: string;
}

export interface SimpleBoxOptions extends JsBoxOptions {
  /** Default "python:slim", as in BoxLite. */
  image?: string;
  /** The runtime; default JsBoxlite.withDefaultConfig(). */
  runtime?: JsBoxlite;
  /** Reuse the box of this name if it exists. Default false. */
  reuseExisting?: boolean;
  /** Default true. */
  autoRemove?: boolean;
}

export declare class SimpleBox implements AsyncDisposable {
  constructor(options?: SimpleBoxOptions);
  /** Throws before the box exists. */
  /** Copies a host file or directory into the box (BoxLite's layout). */
  copyIn(hostPath: string, containerDest: string, options?: CopyOptions): Promise<void>;
  /** Copies a box path to the host (BoxLite's layout), checked as hostile. */
  copyOut(containerSrc: string, hostDest: string, options?: CopyOptions): Promise<void>;
  readonly id: string;
  readonly name: string | undefined;
  readonly created: boolean | null;
  readonly box: JsBox | null;
  getBox(): Promise<JsBox>;
  /** Tunnels to ports in the box (creating it first if needed). */
  readonly network: NetworkHandle;
  /** Prepares a one-shot tunnel to a TCP port inside this box. */
  tunnel(port: number): Promise<BoxTunnel>;
  getId(): Promise<string>;
  info(): Promise<JsBoxInfo>;
  getInfo(): Promise<JsBoxInfo>;
  /** The box's metrics; rejects before the box exists. */
  metrics(): Promise<BoxMetrics>;
  /** Pauses the box with its memory (JsBox.pause); rejects before the box exists. */
  pause(): Promise<PauseInfo>;
  /** Resumes a paused box (JsBox.resume); rejects before the box exists. */
  resume(): Promise<void>;
  /** count running copies of this box at one instant, each wrapped as this class (a CodeBox's fork runs run() in its copy of the interpreter). */
  fork(count?: number, names?: string[]): Promise<this[]>;
  exec(cmd: string, ...args: string[]): Promise<ExecResult>;
  exec(cmd: string, ...argsThenEnv: [...string[], Record<string, string>]): Promise<ExecResult>;
  exec(cmd: string, args: string[], env?: EnvInput | null, options?: ExecOptions): Promise<ExecResult>;
  /** Starts a command and returns its Execution (streaming, stdin closed). */
  spawn(cmd: string, args?: string[], options?: ExecOptions & { env?: EnvInput; stdin?: boolean }): Promise<JsExecution>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface CodeBoxOptions extends SimpleBoxOptions {
  /** The name of run()'s session in the box (default 'codebox'; null: an unnamed session, which ends with this object). */
  sessionName?: string | null;
}

// ---- persistent sessions ----

export interface CellError {
  /** "ValueError", "mymodule.MyError", "SystemExit", or "InterpreterExited" when the interpreter died under the cell. */
  type: string;
  message: string;
  /** As Python prints it. */
  traceback: string;
}

export interface CellResult {
  stdout: string;
  stderr: string;
  /** repr() of the cell's trailing expression (as a notebook shows it); null when there is none or it is None. */
  value: string | null;
  /** The exception the cell ended with. */
  error: CellError | null;
  /** What `python -c` would have exited with: 0, 1 for an exception, SystemExit's code. */
  exitCode: number;
  timedOut: boolean;
  /** The interpreter ended under the cell and was started again: the session's state is gone. */
  restarted: boolean;
  /** The stream was longer than the output limit and holds its first bytes only. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export interface CellChunk {
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface SessionOptions {
  env?: EnvInput;
  cwd?: string;
  user?: string;
  /** How long an interrupted cell or command has to stop before the interpreter or shell is killed and restarted. Default 3. */
  graceSecs?: number;
  /** 1-48 of [A-Za-z0-9_-], local runtimes only: the process outlives the session, and a later session of that kind and name in the box (another process, after a pause, a fork) takes it over with its state. */
  name?: string;
}

/** A running cell: its output while it runs, then its result. */
export declare class CellStream implements AsyncIterable<CellChunk>, AsyncDisposable {
  [Symbol.asyncIterator](): AsyncIterator<CellChunk>;
  /** Waits for the end; stdout/stderr hold what iteration did not return. A timeout rejects with TimeoutError (`result`). */
  result(): Promise<CellResult>;
  /** Interrupts the cell (KeyboardInterrupt), as its timeout would. */
  interrupt(): Promise<void>;
  /** Releases the cell; one still running is interrupted. */
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A live Python interpreter in a box: each cell sees the globals, imports and definitions of the cells before it. */
export declare class PythonSession implements AsyncDisposable {
  readonly closed: boolean;
  run(code: string, options?: { timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): Promise<string>;
  runCell(code: string, options?: { timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): Promise<CellResult>;
  stream(code: string, options?: { timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): CellStream;
  interrupt(): void;
  /** Starts a fresh interpreter: all state is gone. */
  reset(): Promise<void>;
  info(): { kind: 'python'; pid: number; restarts: number; python: string };
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A live shell in a box: cd, export and shell variables of one exec are there for the next. */
export declare class ShellSession implements AsyncDisposable {
  readonly closed: boolean;
  /** Each argument is one word (['eval', script] runs shell code); env is for this command only. */
  exec(argv: string[], options?: { env?: EnvInput; timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): Promise<ExecResult>;
  interrupt(): void;
  reset(): Promise<void>;
  info(): { kind: 'shell'; pid: number; restarts: number };
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A rich result of a cell: one representation per format (png, jpeg base64; json decoded), the rest in extra by MIME type. */
export declare class CodeResult {
  readonly isMainResult: boolean;
  readonly text?: string;
  readonly html?: string;
  readonly markdown?: string;
  readonly svg?: string;
  readonly png?: string;
  readonly jpeg?: string;
  readonly pdf?: string;
  readonly latex?: string;
  readonly json?: unknown;
  readonly javascript?: string;
  readonly extra: Record<string, string>;
  /** The MIME bundle as the library gave it. */
  readonly raw: Record<string, string>;
  /** 'text', 'html', 'png'..., then the extra MIME types. */
  formats(): string[];
}

/** What a code context's cell did (CodeBox.runCode). */
export declare class CodeExecution {
  readonly results: CodeResult[];
  readonly logs: { stdout: string[]; stderr: string[]; stdoutTruncated: boolean; stderrTruncated: boolean };
  /** What the cell raised (name ExitCode for a bash cell that exited non-zero). */
  readonly error?: { name: string; value: string; traceback: string };
  readonly executionCount: number;
  readonly resultsTruncated: boolean;
  readonly restarted: boolean;
  readonly timedOut: boolean;
  /** The main result's text. */
  get text(): string | undefined;
}

export type CodeLanguage = 'python' | 'javascript' | 'js' | 'bash' | 'sh';

/** A code interpreter's context in a box (python, javascript, bash): cells keep their state and give rich results. */
export declare class CodeContext implements AsyncDisposable {
  readonly language: 'python' | 'javascript' | 'bash';
  readonly closed: boolean;
  runCode(code: string, options?: { timeoutSecs?: number; envs?: EnvInput }): Promise<CodeExecution>;
  /** A fresh interpreter: the state is gone, the execution count starts again. */
  restart(): Promise<void>;
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class CodeBox extends SimpleBox {
  constructor(options?: CodeBoxOptions);
  /**
   * Runs code as E2B's code interpreter does, in the box's default context of the language
   * (python by default, javascript, bash; apart from run()'s interpreter), or in options.context.
   * Resolves to its results (last value, display() calls, matplotlib figures), logs and error.
   */
  runCode(code: string, options?: { language?: CodeLanguage; context?: CodeContext; timeoutSecs?: number; envs?: EnvInput }): Promise<CodeExecution>;
  /** Another code context, closed with the box. */
  createCodeContext(language?: CodeLanguage, options?: SessionOptions): Promise<CodeContext>;
  /**
   * Runs Python code as a cell of the box's persistent session; resolves to stdout. Rejects with
   * ExecError (exitCode, stderr with the traceback) on failure, TimeoutError on timeout. With env,
   * cwd or user it runs in a fresh `python3 -c` instead. stdout longer than outputLimitBytes is
   * cut there and ends with "\n[output truncated: stdout was longer than N bytes; the rest was dropped]\n".
   */
  run(code: string, options?: ExecOptions & { env?: EnvInput }): Promise<string>;
  /** Runs a cell and resolves to everything it did; an exception is a result. */
  runCell(code: string, options?: { timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): Promise<CellResult>;
  /** A cell whose output arrives while it runs. */
  stream(code: string, options?: { timeoutSecs?: number; timeout?: number; timeoutMs?: number; outputLimitBytes?: number }): CellStream;
  /** Restarts run()'s interpreter. */
  reset(): Promise<void>;
  /** run()'s session. */
  session(): Promise<PythonSession>;
  /** Another, independent interpreter in the box. */
  newSession(options?: SessionOptions & { python?: string }): Promise<PythonSession>;
  runScript(scriptPath: string): Promise<string>;
  installPackage(packageName: string): Promise<string>;
  installPackages(...packages: string[]): Promise<string>;
}

export interface InteractiveBoxOptions extends SimpleBoxOptions {
  /** Default "/bin/sh". */
  shell?: string;
  /**
   * Hand this process's terminal to the box's shell on start() (raw mode, keys and resizes
   * forwarded) until it exits. Default: whether stdin is a terminal.
   */
  tty?: boolean;
}

export declare class InteractiveBox extends SimpleBox {
  constructor(options?: InteractiveBoxOptions);
  /** The live shell that exec() runs in (cd, export and shell variables persist); with cwd or user a command runs outside it. */
  shellSession(): Promise<ShellSession>;
  /** Restarts exec()'s shell. */
  reset(): Promise<void>;
  /** Starts the shell: on a terminal handed this one with tty, else on pipes. */
  start(): Promise<void>;
  readonly tty: boolean;
  readonly execution: JsExecution | null;
  write(data: Buffer | Uint8Array | string): Promise<void>;
  closeStdin(): Promise<void>;
  wait(): Promise<ExitStatus>;
}
