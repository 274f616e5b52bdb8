'use strict';

// BoxLite 0.10's advanced box options: capabilities, security and a health
// check (docs/security-options.md says what each setting changes here).
// BoxLite's Node API puts `security` and `healthCheck` at the top of the box
// options and `advanced: {capabilities}`; this library also takes them all
// under `advanced` (the C ABI's shape), not both.

const {
  DEFAULT_HEALTH_INTERVAL_SECS, DEFAULT_HEALTH_TIMEOUT_SECS, DEFAULT_HEALTH_RETRIES, DEFAULT_HEALTH_START_PERIOD_SECS,
  SECURITY_MAXIMUM_MAX_OPEN_FILES, SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES, SECURITY_MAXIMUM_MAX_PROCESSES,
} = require('./defaults');

function typeOf(v) {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkKeys(o, known, where) {
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
}

function names(v, where) {
  if (!Array.isArray(v)) throw new TypeError(`${where} must be an array of strings, got ${typeOf(v)}`);
  return v.map((n, i) => {
    if (typeof n !== 'string' || n === '') throw new TypeError(`${where}[${i}] must be a non-empty string, got ${typeOf(n)}`);
    return n;
  });
}

function capabilitiesOption(v, where) {
  if (!isPlainObject(v)) throw new TypeError(`${where} must be {add, drop}, got ${typeOf(v)}`);
  checkKeys(v, ['add', 'drop'], where);
  const c = {};
  if (v.add !== undefined && v.add !== null) c.add = names(v.add, `${where}.add`);
  if (v.drop !== undefined && v.drop !== null) c.drop = names(v.drop, `${where}.drop`);
  return c;
}

const SECURITY_FLAGS = { jailerEnabled: 'jailer_enabled', seccompEnabled: 'seccomp_enabled', networkEnabled: 'network_enabled', closeFds: 'close_fds' };
const SECURITY_LIMITS = { maxOpenFiles: 'max_open_files', maxFileSize: 'max_file_size_bytes', maxProcesses: 'max_processes', maxMemory: 'max_memory_bytes', maxCpuTime: 'max_cpu_time_secs' };

function securityOption(v, where) {
  if (!isPlainObject(v)) throw new TypeError(`${where} must be an object (SecurityOptions), got ${typeOf(v)}`);
  checkKeys(v, [...Object.keys(SECURITY_FLAGS), ...Object.keys(SECURITY_LIMITS)], where);
  const s = {};
  for (const [k, wire] of Object.entries(SECURITY_FLAGS)) {
    if (v[k] === undefined || v[k] === null) continue; // the standard preset's
    if (typeof v[k] !== 'boolean') throw new TypeError(`${where}.${k} must be a boolean, got ${typeOf(v[k])}`);
    s[wire] = v[k];
  }
  for (const [k, wire] of Object.entries(SECURITY_LIMITS)) {
    if (v[k] === undefined || v[k] === null) continue; // no limit
    if (typeof v[k] !== 'number' || !Number.isSafeInteger(v[k])) throw new TypeError(`${where}.${k} must be a whole number, got ${typeOf(v[k]) === 'number' ? v[k] : typeOf(v[k])}`);
    if (v[k] <= 0) throw new RangeError(`${where}.${k} must be above 0 (leave it out for no limit), got ${v[k]}`);
    s[wire] = v[k];
  }
  return s;
}

function healthCheckOption(v, where) {
  if (!isPlainObject(v)) throw new TypeError(`${where} must be {interval, timeout, retries, startPeriod}, got ${typeOf(v)}`);
  checkKeys(v, ['interval', 'timeout', 'retries', 'startPeriod', 'command'], where);
  const h = {};
  for (const [k, wire] of [['interval', 'interval_secs'], ['timeout', 'timeout_secs'], ['startPeriod', 'start_period_secs']]) {
    if (v[k] === undefined || v[k] === null) continue;
    if (typeof v[k] !== 'number' || !Number.isFinite(v[k])) throw new TypeError(`${where}.${k} must be a finite number of seconds, got ${typeOf(v[k])}`);
    h[wire] = v[k];
  }
  if (v.retries !== undefined && v.retries !== null) {
    if (typeof v.retries !== 'number' || !Number.isInteger(v.retries)) throw new TypeError(`${where}.retries must be an integer, got ${typeOf(v.retries)}`);
    h.retries = v.retries;
  }
  if (v.command !== undefined && v.command !== null) h.command = names(v.command, `${where}.command`);
  return h;
}

/**
 * The C ABI's `advanced` from box options o: o.advanced ({capabilities,
 * security, healthCheck}) and BoxLite's top-level o.security, o.healthCheck.
 */
function advancedOption(o, where) {
  const a = {};
  const adv = o.advanced;
  if (adv !== undefined && adv !== null) {
    if (!isPlainObject(adv)) throw new TypeError(`${where}.advanced must be {capabilities, security, healthCheck}, got ${typeOf(adv)}`);
    checkKeys(adv, ['capabilities', 'security', 'healthCheck'], `${where}.advanced`);
  }
  const pick = (k) => {
    const inner = adv && adv[k] !== undefined && adv[k] !== null ? adv[k] : undefined;
    const top = o[k] !== undefined && o[k] !== null ? o[k] : undefined;
    if (inner !== undefined && top !== undefined) throw new TypeError(`${where}: give ${k} once, in ${where}.${k} or ${where}.advanced.${k}`);
    return inner !== undefined ? [inner, `${where}.advanced.${k}`] : top !== undefined ? [top, `${where}.${k}`] : [undefined, ''];
  };
  const [caps, cw] = pick('capabilities');
  if (caps !== undefined) a.capabilities = capabilitiesOption(caps, cw);
  const [sec, sw] = pick('security');
  if (sec !== undefined) a.security = securityOption(sec, sw);
  const [hc, hw] = pick('healthCheck');
  if (hc !== undefined) a.health_check = healthCheckOption(hc, hw);
  return Object.keys(a).length ? a : undefined;
}

/** BoxLite's SecurityOptions presets, as plain objects (BoxLite's Node SDK has the shape only). */
const SecurityOptions = Object.freeze({
  /** No host jail, no seccomp filter in the box: for debugging what isolation gets in the way of. */
  development: () => ({ jailerEnabled: false, seccompEnabled: false, networkEnabled: true, closeFds: false }),
  /** The host jail and the box's seccomp filter: every box's default. */
  standard: () => ({ jailerEnabled: true, seccompEnabled: true, networkEnabled: true, closeFds: true }),
  /** standard, and every box process limited to 1024 open files, 1 GiB files, 100 processes. */
  maximum: () => ({ jailerEnabled: true, seccompEnabled: true, networkEnabled: true, closeFds: true, maxOpenFiles: SECURITY_MAXIMUM_MAX_OPEN_FILES, maxFileSize: SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES, maxProcesses: SECURITY_MAXIMUM_MAX_PROCESSES }),
});

/** BoxLite's HealthCheckOptions defaults (seconds). */
const HEALTH_CHECK_DEFAULTS = Object.freeze({ interval: DEFAULT_HEALTH_INTERVAL_SECS, timeout: DEFAULT_HEALTH_TIMEOUT_SECS, retries: DEFAULT_HEALTH_RETRIES, startPeriod: DEFAULT_HEALTH_START_PERIOD_SECS });

const HEALTH_STATES = { none: 'None', starting: 'Starting', healthy: 'Healthy', unhealthy: 'Unhealthy' };

/** info's health_status → BoxLite's JsHealthStatus ({state: 'None' | 'Starting' | 'Healthy' | 'Unhealthy', failures, lastCheck}). */
function healthStatus(h) {
  h = h || {};
  return { state: HEALTH_STATES[h.state] || 'None', failures: h.failures || 0, lastCheck: h.last_check || undefined, lastError: h.last_error || undefined };
}

/** info's config.advanced (the wire's names) → BoxLite's AdvancedBoxOptions. */
function advancedInfo(a) {
  if (!a) return undefined;
  const out = {};
  if (a.capabilities) out.capabilities = { add: a.capabilities.add || [], drop: a.capabilities.drop || [] };
  if (a.security) {
    out.security = {};
    for (const [k, wire] of [...Object.entries(SECURITY_FLAGS), ...Object.entries(SECURITY_LIMITS)]) {
      if (a.security[wire] !== undefined) out.security[k] = a.security[wire];
    }
  }
  if (a.health_check) {
    const h = a.health_check;
    out.healthCheck = { interval: h.interval_secs, timeout: h.timeout_secs, retries: h.retries, startPeriod: h.start_period_secs, command: h.command };
  }
  return out;
}

module.exports = { advancedOption, advancedInfo, healthStatus, SecurityOptions, HEALTH_CHECK_DEFAULTS };
