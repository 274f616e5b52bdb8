'use strict';
// Option checking and conversion: BoxLite's camelCase options to the C ABI's
// JSON. Wrong types are TypeErrors naming the option; options of BoxLite that
// this library does not have yet are BoxliteErrors with code "unsupported"
// (never silently ignored); unknown options are TypeErrors. Values are the
// library's to check: out of range, it answers invalid_argument naming the
// option's wire field (memory_mib, timeout_secs, ...), as in every binding.
const { unsupported } = require('./errors');
const { secretsOption } = require('./secret');
const { advancedOption, advancedInfo, healthStatus } = require('./advanced');

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkString(v, name, { allowEmpty = false } = {}) {
  if (typeof v !== 'string') throw new TypeError(`${name} must be a string, got ${typeOf(v)}`);
  if (!allowEmpty && v === '') throw new TypeError(`${name} must not be empty`);
  return v;
}

function checkInt(v, name) {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${name} must be an integer, got ${typeOf(v) === 'number' ? v : typeOf(v)}`);
  return v;
}

/** A number of seconds; its range is the library's. Infinities are refused here: JSON would send them as null. */
function checkSeconds(v, name) {
  if (typeof v !== 'number' || Number.isNaN(v)) throw new TypeError(`${name} must be a number of seconds, got ${typeOf(v)}`);
  if (!Number.isFinite(v)) throw new RangeError(`${name} must be a finite number, got ${v}`);
  return v;
}

/** Bytes of output collected per stream of a command run to completion (the C ABI's default). */
const DEFAULT_OUTPUT_LIMIT = require('./defaults').DEFAULT_OUTPUT_LIMIT_BYTES;

/** An output limit: a whole number of bytes > 0 (undefined/null: the default). */
function checkOutputLimit(v, name) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${name} must be a whole number of bytes, got ${typeOf(v) === 'number' ? v : typeOf(v)}`);
  if (v <= 0 || v > Number.MAX_SAFE_INTEGER) throw new RangeError(`${name} must be > 0, got ${v}`);
  return v;
}

function checkBool(v, name) {
  if (typeof v !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${typeOf(v)}`);
  return v;
}

/** env as {K: V}, [{key, value}] (BoxLite's JsEnvVar) or [[K, V]] → {K: V}. */
function normalizeEnv(env, name) {
  if (env === undefined || env === null) return undefined;
  const out = {};
  const put = (k, v, where) => {
    checkString(k, `${where} key`);
    if (typeof v !== 'string') throw new TypeError(`${name}[${JSON.stringify(k)}] must be a string, got ${typeOf(v)}`);
    out[k] = v;
  };
  if (Array.isArray(env)) {
    env.forEach((e, i) => {
      if (Array.isArray(e) && e.length === 2) put(e[0], e[1], `${name}[${i}]`);
      else if (isPlainObject(e) && 'key' in e) {
        checkKeys(e, ['key', 'value'], `${name}[${i}]`);
        put(e.key, e.value, `${name}[${i}]`);
      }
      else throw new TypeError(`${name}[${i}] must be [key, value] or {key, value}`);
    });
    return out;
  }
  if (!isPlainObject(env)) throw new TypeError(`${name} must be an object of strings, got ${typeOf(env)}`);
  for (const [k, v] of Object.entries(env)) put(k, v, name);
  return out;
}

// BoxLite options this library does not implement yet; `ok` says which
// values mean "the default" and are accepted.
const NOT_YET = {
  rootfsPath: { ok: (v) => v === undefined || v === null, why: 'boxes boot from images in the store (load one with runtime.images.load)' },
};

const BOX_KEYS = ['image', 'name', 'cpus', 'memoryMib', 'diskSizeGb', 'env', 'workingDir', 'user', 'autoRemove', 'autoDelete', 'bootTimeoutSecs',
  'network', 'ports', 'volumes', 'detach', 'entrypoint', 'cmd', 'hostname', 'prestart', 'autoPauseSecs', 'secrets',
  'advanced', 'security', 'healthCheck'];

/**
 * The one check of option keys, at every depth: a key not in `known` is a
 * TypeError naming it where it is (`options.network.outbound.alowNet`), so
 * an option this library does not understand is never dropped.
 */
function checkKeys(o, known, where) {
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
}

/** One direction of a network policy: {mode, allowNet} → {mode, allow_net}. */
function directionOption(v, where) {
  if (!isPlainObject(v)) throw new TypeError(`${where} must be {mode, allowNet}, got ${typeOf(v)}`);
  checkKeys(v, ['mode', 'allowNet'], where);
  if (v.mode === undefined || v.mode === null) {
    throw new TypeError(`${where}.mode is required and must be "enabled" or "disabled"`);
  }
  const d = { mode: checkString(v.mode, `${where}.mode`) };
  if (v.allowNet !== undefined && v.allowNet !== null) {
    if (!Array.isArray(v.allowNet)) throw new TypeError(`${where}.allowNet must be an array of strings, got ${typeOf(v.allowNet)}`);
    if (v.allowNet.length) d.allow_net = v.allowNet.map((a, i) => checkString(a, `${where}.allowNet[${i}]`));
  }
  return d;
}

/**
 * network: 'enabled' | 'disabled' | BoxLite's {outbound: {mode, allowNet}, inbound: {mode}}
 * | the earlier flat {mode, allowNet} (not mixed with outbound/inbound) → the C ABI's network;
 * every key at every depth is honoured or refused; the library checks the values.
 */
function networkOption(v, where) {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return { mode: checkString(v, where) };
  if (!isPlainObject(v)) throw new TypeError(`${where} must be 'enabled', 'disabled' or {outbound, inbound}, got ${typeOf(v)}`);
  checkKeys(v, ['outbound', 'inbound', 'mode', 'allowNet'], where);
  const split = v.outbound !== undefined || v.inbound !== undefined;
  if (split) {
    if (v.mode !== undefined || v.allowNet !== undefined) {
      throw new TypeError(`${where} cannot mix outbound/inbound with the deprecated mode/allowNet. Use ${where.split('.').pop()}: { outbound: { mode, allowNet }, inbound }`);
    }
    const n = {};
    if (v.outbound !== undefined) n.outbound = directionOption(v.outbound, `${where}.outbound`);
    if (v.inbound !== undefined) n.inbound = directionOption(v.inbound, `${where}.inbound`);
    return n;
  }
  const n = {};
  if (v.mode !== undefined && v.mode !== null) n.mode = checkString(v.mode, `${where}.mode`);
  if (v.allowNet !== undefined && v.allowNet !== null) {
    if (!Array.isArray(v.allowNet)) throw new TypeError(`${where}.allowNet must be an array of strings, got ${typeOf(v.allowNet)}`);
    if (v.allowNet.length) n.allow_net = v.allowNet.map((a, i) => checkString(a, `${where}.allowNet[${i}]`));
  }
  return n;
}

/** ports: [{hostPort, guestPort, protocol, hostIp}] (hostPort 0 or absent picks a free port) → the C ABI's ports. */
function portsOption(v, where) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new TypeError(`${where} must be an array of {hostPort, guestPort, protocol, hostIp}, got ${typeOf(v)}`);
  return v.map((p, i) => {
    const w = `${where}[${i}]`;
    if (!isPlainObject(p)) throw new TypeError(`${w} must be {hostPort, guestPort, protocol, hostIp}, got ${typeOf(p)}`);
    checkKeys(p, ['hostPort', 'guestPort', 'protocol', 'hostIp'], w);
    if (typeof p.guestPort !== 'number' || !Number.isInteger(p.guestPort)) throw new TypeError(`${w}.guestPort must be an integer, got ${typeOf(p.guestPort)}`);
    const c = { guest_port: p.guestPort, host_port: 0 };
    if (p.hostPort !== undefined && p.hostPort !== null) {
      if (typeof p.hostPort !== 'number' || !Number.isInteger(p.hostPort)) throw new TypeError(`${w}.hostPort must be an integer, got ${typeOf(p.hostPort)}`);
      c.host_port = p.hostPort;
    }
    if (p.protocol !== undefined && p.protocol !== null) c.protocol = checkString(p.protocol, `${w}.protocol`);
    if (p.hostIp !== undefined && p.hostIp !== null) c.host_ip = checkString(p.hostIp, `${w}.hostIp`);
    return c;
  });
}

/** BoxLite's volumes [{hostPath, guestPath, readOnly}] → the C ABI's [{host_path, guest_path, read_only}]. */
function normalizeVolumes(v, name) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new TypeError(`${name} must be an array of {hostPath, guestPath, readOnly}, got ${typeOf(v)}`);
  return v.map((m, i) => {
    if (!isPlainObject(m)) throw new TypeError(`${name}[${i}] must be {hostPath, guestPath, readOnly}, got ${typeOf(m)}`);
    checkKeys(m, ['hostPath', 'guestPath', 'readOnly', 'sizeLimitBytes'], `${name}[${i}]`);
    const out = { host_path: checkString(m.hostPath, `${name}[${i}].hostPath`), guest_path: checkString(m.guestPath, `${name}[${i}].guestPath`) };
    if (m.readOnly !== undefined && m.readOnly !== null) out.read_only = checkBool(m.readOnly, `${name}[${i}].readOnly`);
    if (m.sizeLimitBytes !== undefined && m.sizeLimitBytes !== null) out.size_limit_bytes = checkInt(m.sizeLimitBytes, `${name}[${i}].sizeLimitBytes`);
    return out;
  });
}

/**
 * BoxLite's box options (JsBoxOptions / SimpleBoxOptions without the SDK-only
 * keys) → the C ABI's options object. `extra` lists keys the caller handles.
 */
function boxOptions(o, where = 'options', extra = []) {
  if (o === undefined || o === null) o = {};
  if (!isPlainObject(o)) throw new TypeError(`${where} must be an object, got ${typeOf(o)}`);
  for (const k of Object.keys(o)) {
    if (BOX_KEYS.includes(k) || extra.includes(k)) continue;
    if (Object.hasOwn(NOT_YET, k)) {
      if (!NOT_YET[k].ok(o[k])) throw unsupported(`${where}.${k}: ${NOT_YET[k].why}`);
      continue;
    }
    throw new TypeError(`${where}.${k} is not a known option`);
  }
  const c = {};
  if (o.image !== undefined) c.image = checkString(o.image, `${where}.image`);
  if (o.name !== undefined && o.name !== null) c.name = checkString(o.name, `${where}.name`);
  if (o.cpus !== undefined) c.cpus = checkInt(o.cpus, `${where}.cpus`);
  if (o.memoryMib !== undefined) c.memory_mib = checkInt(o.memoryMib, `${where}.memoryMib`);
  if (o.diskSizeGb !== undefined) c.disk_size_gb = checkInt(o.diskSizeGb, `${where}.diskSizeGb`);
  const env = normalizeEnv(o.env, `${where}.env`);
  if (env && Object.keys(env).length) c.env = env;
  if (o.workingDir !== undefined && o.workingDir !== null) c.working_dir = checkString(o.workingDir, `${where}.workingDir`);
  if (o.user !== undefined && o.user !== null) c.user = checkString(o.user, `${where}.user`);
  if (o.hostname !== undefined && o.hostname !== null) c.hostname = checkString(o.hostname, `${where}.hostname`);
  if (o.prestart !== undefined && o.prestart !== null) {
    if (!Array.isArray(o.prestart)) throw new TypeError(`${where}.prestart must be an array of strings, got ${typeOf(o.prestart)}`);
    c.prestart = o.prestart.map((k, i) => checkString(k, `${where}.prestart[${i}]`));
  }
  const volumes = normalizeVolumes(o.volumes, `${where}.volumes`);
  if (volumes && volumes.length) c.volumes = volumes;
  if (o.autoRemove !== undefined) c.auto_remove = checkBool(o.autoRemove, `${where}.autoRemove`);
  if (o.autoDelete !== undefined && o.autoDelete !== null) {
    // BoxLite 0.10's: 0 keeps the box after stop, above 0 deletes it at stop (a
    // local runtime at stop whatever the number); it takes precedence over autoRemove.
    const n = checkInt(o.autoDelete, `${where}.autoDelete`);
    if (n < 0) throw new RangeError(`${where}.autoDelete must be >= 0 (0 keeps the box after stop), got ${n}`);
    c.auto_remove = n > 0;
  }
  if (o.detach !== undefined && o.detach !== null) c.detach = checkBool(o.detach, `${where}.detach`);
  for (const k of ['entrypoint', 'cmd']) {
    if (o[k] === undefined || o[k] === null) continue;
    if (!Array.isArray(o[k])) throw new TypeError(`${where}.${k} must be an array of strings, got ${typeOf(o[k])}`);
    c[k] = o[k].map((a, i) => checkString(a, `${where}.${k}[${i}]`, { allowEmpty: i > 0 }));
  }
  if (o.bootTimeoutSecs !== undefined) {
    // The library refuses 0 (invalid_argument), as in every binding.
    c.boot_timeout_secs = checkSeconds(o.bootTimeoutSecs, `${where}.bootTimeoutSecs`);
  }
  if (o.autoPauseSecs !== undefined && o.autoPauseSecs !== null) {
    c.auto_pause_secs = checkSeconds(o.autoPauseSecs, `${where}.autoPauseSecs`);
  }
  const network = networkOption(o.network, `${where}.network`);
  if (network) c.network = network;
  const ports = portsOption(o.ports, `${where}.ports`);
  if (ports && ports.length) c.ports = ports;
  const secrets = secretsOption(o.secrets, `${where}.secrets`);
  if (secrets && secrets.length) c.secrets = secrets;
  const advanced = advancedOption(o, where);
  if (advanced) c.advanced = advanced;
  return c;
}

/**
 * Per-command options {cwd, user, timeoutSecs | timeoutMs | timeout (seconds), env, stdin,
 * tty, rows, cols (the terminal's size with tty; default 24x80), outputLimitBytes}.
 */
function execOptions(o, where = 'options') {
  if (o === undefined || o === null) return {};
  if (!isPlainObject(o)) throw new TypeError(`${where} must be an object, got ${typeOf(o)}`);
  const known = ['cwd', 'user', 'timeoutSecs', 'timeoutMs', 'timeout', 'env', 'stdin', 'tty', 'rows', 'cols', 'outputLimitBytes'];
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
  const r = {};
  if (o.cwd !== undefined && o.cwd !== null) r.cwd = checkString(o.cwd, `${where}.cwd`);
  if (o.user !== undefined && o.user !== null) r.user = checkString(o.user, `${where}.user`);
  const timeouts = ['timeoutSecs', 'timeoutMs', 'timeout'].filter((k) => o[k] !== undefined && o[k] !== null);
  if (timeouts.length > 1) throw new TypeError(`${where}: give one of ${timeouts.join(', ')}`);
  if (o.timeoutSecs != null) r.timeoutSecs = checkSeconds(o.timeoutSecs, `${where}.timeoutSecs`);
  if (o.timeout != null) r.timeoutSecs = checkSeconds(o.timeout, `${where}.timeout`);
  if (o.timeoutMs != null) r.timeoutSecs = checkSeconds(o.timeoutMs, `${where}.timeoutMs`) / 1000;
  if (o.env !== undefined) r.env = normalizeEnv(o.env, `${where}.env`);
  if (o.stdin !== undefined) r.stdin = checkBool(o.stdin, `${where}.stdin`);
  if (o.tty !== undefined && o.tty !== null) r.tty = checkBool(o.tty, `${where}.tty`);
  for (const k of ['rows', 'cols']) {
    if (o[k] !== undefined && o[k] !== null) r[k] = checkInt(o[k], `${where}.${k}`); // the library checks their range and that they come with tty
  }
  const limit = checkOutputLimit(o.outputLimitBytes, `${where}.outputLimitBytes`);
  if (limit !== undefined) r.outputLimitBytes = limit;
  return r;
}

function checkArgs(args, where = 'args') {
  if (!Array.isArray(args)) throw new TypeError(`${where} must be an array of strings, got ${typeOf(args)}`);
  args.forEach((a, i) => {
    if (typeof a !== 'string') throw new TypeError(`${where}[${i}] must be a string, got ${typeOf(a)}`);
  });
  return args;
}

const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

function camelize(v) {
  if (Array.isArray(v)) return v.map(camelize);
  if (!isPlainObject(v)) return v;
  const o = {};
  for (const [k, x] of Object.entries(v)) o[camel(k)] = k === 'env' ? x : camelize(x);
  return o;
}

/** BoxLite's JsNetworkInfo (every list present) with, while running, the runtime's addresses and ports. */
function networkInfo(n = {}, running) {
  const dir = (d = {}) => ({ mode: d.mode || 'enabled', allowNet: d.allow_net || [] });
  const out = dir(n.outbound);
  return {
    ...(running || {}),
    outbound: out,
    inbound: dir(n.inbound),
    mode: out.mode,
    allowNet: out.allowNet,
    publishedPorts: camelize(n.published_ports || []),
  };
}

/** The library's box info JSON → BoxLite's JsBoxInfo shape: the config's fields (camelCased), then the state. */
function boxInfo(j) {
  const cfg = j.config || {};
  const rt = j.runtime ? camelize(j.runtime) : undefined;
  const { image, name, network, ports, ...config } = camelize(cfg); // the network and ports shown are the running ones
  return {
    ...config,
    id: j.id,
    name: j.name || undefined,
    image: j.image,
    status: j.state,
    state: { status: j.state, running: j.state === 'running', pid: rt ? rt.vmmPid : undefined },
    createdAt: j.created_at,
    // BoxLite 0.10's: when the VM became ready; the later of that and the last
    // exec, copy or session call this process saw (undefined unless running).
    startedAt: (rt && rt.startedAt) || undefined,
    lastActivityAt: (rt && rt.lastActivityAt) || undefined,
    autoDelete: cfg.auto_remove ? 1 : 0,
    hostname: cfg.hostname || 'boxlite',
    prestart: cfg.prestart || [],
    env: cfg.env || {},
    volumes: (cfg.volumes || []).map((v) => ({ hostPath: v.host_path, guestPath: v.guest_path, readOnly: !!v.read_only, sizeLimitBytes: v.size_limit_bytes || 0 })),
    lastExit: j.last_exit || undefined,
    faulted: !!j.faulted,
    // BoxLite's: the health check's state ('None' without one, or when not running).
    healthStatus: healthStatus(j.health_status),
    advanced: advancedInfo(cfg.advanced),
    networkMode: (network && network.mode) || 'enabled',
    // BoxLite's network info (outbound, inbound, mode, allowNet, publishedPorts) with, while the
    // box runs with a NIC, guestIp, gatewayIp and the ports as bound.
    network: networkInfo(j.network, rt && rt.network),
    ports: (rt && rt.network && rt.network.ports) || [],
    runtime: rt,
    dir: j.dir,
  };
}

module.exports = {
  networkOption, directionOption,
  boxOptions, execOptions, checkArgs, checkKeys, checkString, checkInt, checkSeconds, checkOutputLimit, normalizeEnv, boxInfo, camelize, isPlainObject, typeOf,
  DEFAULT_OUTPUT_LIMIT,
};
