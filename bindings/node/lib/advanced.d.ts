// BoxLite 0.10's advanced box options (lib/advanced.js; docs/security-options.md), the health
// status in box info, and the runtime's registry settings (lib/runtime.js imageRegistries).

/** Capabilities added to box processes' default set (docker's without MKNOD), then dropped (BoxLite's ContainerCapabilities). */
export interface ContainerCapabilities {
  /** Linux capability names (NET_ADMIN or CAP_NET_ADMIN, any case; ALL). An unknown one fails create naming it. */
  add?: string[];
  drop?: string[];
}

/** BoxLite's SecurityOptions; an absent field takes the standard preset's. See docs/security-options.md. */
export interface SecurityOptions {
  /** The box's VMM runs in the host jail. */
  jailerEnabled?: boolean;
  /** Box processes run under the box's seccomp filter. */
  seccompEnabled?: boolean;
  /** RLIMIT_NOFILE of every box process. */
  maxOpenFiles?: number;
  /** RLIMIT_FSIZE (bytes) of every box process. */
  maxFileSize?: number;
  /** RLIMIT_NPROC of every box process (Linux does not hold root to it). */
  maxProcesses?: number;
  /** RLIMIT_AS (bytes) of every box process. */
  maxMemory?: number;
  /** RLIMIT_CPU (seconds) of every box process. */
  maxCpuTime?: number;
  /** BoxLite's macOS-only setting: false is refused (use network: 'disabled'). */
  networkEnabled?: boolean;
  /** Changes nothing here: the shim and VMM start with only their own descriptors. */
  closeFds?: boolean;
}

/** BoxLite's SecurityOptions presets. */
export declare const SecurityOptions: {
  development(): SecurityOptions;
  standard(): SecurityOptions;
  maximum(): SecurityOptions;
};

/** BoxLite's HealthCheckOptions (seconds); command is this SDK's addition (default ["true"]). */
export interface HealthCheckOptions {
  interval?: number;
  timeout?: number;
  retries?: number;
  startPeriod?: number;
  command?: string[];
}

/** BoxLite's HealthCheckOptions() defaults. */
export declare const HEALTH_CHECK_DEFAULTS: Readonly<Required<Omit<HealthCheckOptions, 'command'>>>;

/** BoxLite's AdvancedBoxOptions (security and healthCheck may also sit at the top of the box options, not both). */
export interface AdvancedBoxOptions {
  capabilities?: ContainerCapabilities;
  security?: SecurityOptions;
  healthCheck?: HealthCheckOptions;
}

export type JsHealthState = 'None' | 'Starting' | 'Healthy' | 'Unhealthy';

/** BoxLite's JsHealthStatus, with why the last check failed. */
export interface JsHealthStatus {
  state: JsHealthState;
  failures: number;
  lastCheck?: string;
  lastError?: string;
}

/** BoxLite's JsImageRegistryAuth: username and password, or a bearer token; sent to the host only, never shown. */
export interface JsImageRegistryAuth {
  username?: string;
  password?: string;
  bearerToken?: string;
}

/** BoxLite's JsImageRegistry (mirrors is this SDK's: URLs tried first). */
export interface JsImageRegistry {
  host: string;
  transport?: 'https' | 'http';
  skipVerify?: boolean;
  search?: boolean;
  auth?: JsImageRegistryAuth;
  mirrors?: string[];
}
