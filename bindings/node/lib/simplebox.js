'use strict';
// SimpleBox: BoxLite's convenience class (CodeBox and InteractiveBox extend
// it). The box is created lazily on first use and stopped by stop() or
// `await using`.
const { JsBoxlite } = require('./runtime');
const { BoxliteError, TimeoutError } = require('./errors');
const { collectCapped } = require('./execution');
const { NetworkHandle } = require('./network');
const { boxOptions, execOptions, checkArgs, checkString, normalizeEnv, isPlainObject, typeOf } = require('./options');

const SDK_KEYS = ['runtime', 'reuseExisting'];

class SimpleBox {
  /**
   * new SimpleBox({ image, memoryMib, cpus, diskSizeGb, name, autoRemove (default DEFAULT_AUTO_REMOVE: true),
   *                 workingDir, env, user, bootTimeoutSecs, network, ports, runtime, reuseExisting })
   */
  constructor(options = {}) {
    if (!isPlainObject(options)) throw new TypeError(`options must be an object, got ${typeOf(options)}`);
    this._boxOpts = boxOptions(options, 'options', SDK_KEYS);
    if (this._boxOpts.image === undefined) this._boxOpts.image = this._defaultImage();
    const rt = options.runtime;
    if (rt !== undefined && rt !== null && !(rt instanceof JsBoxlite)) {
      throw new TypeError('options.runtime must be a JsBoxlite runtime');
    }
    this._runtime = rt || JsBoxlite.withDefaultConfig();
    this._name = this._boxOpts.name;
    delete this._boxOpts.name;
    this._reuseExisting = options.reuseExisting === undefined ? false : !!options.reuseExisting;
    this._box = null;
    this._boxPromise = null;
    this._created = null;
    this._stopped = false;
    this._stopping = null;
  }

  /** @internal */
  _defaultImage() {
    return 'python:slim'; // BoxLite's documented default
  }

  /** @internal Creates the box on first use. */
  _ensureBox() {
    if (this._stopped) {
      return Promise.reject(new BoxliteError('this box was stopped', { code: 'invalid_state' }));
    }
    if (!this._boxPromise) {
      const opts = camelOptions(this._boxOpts);
      this._boxPromise = (async () => {
        if (this._reuseExisting) {
          const r = await this._runtime.getOrCreate(opts, this._name);
          this._created = r.created;
          return r.box;
        }
        const box = await this._runtime.create(opts, this._name); // configured
        try {
          await box.start();
        } catch (e) {
          await box.remove(true).catch(() => {}); // a failed first start leaves nothing; e says why
          throw e;
        }
        this._created = true;
        return box;
      })();
      this._boxPromise.then(
        (b) => {
          this._box = b;
        },
        () => {
          this._boxPromise = null; // a later call tries again
        },
      );
    }
    return this._boxPromise;
  }

  /** The box id; throws before the box exists (use getId()). */
  get id() {
    if (!this._box) throw new BoxliteError('Box not yet created. Call exec() first or use getId().', { code: 'invalid_state' });
    return this._box.id;
  }

  async getId() {
    return (await this._ensureBox()).id;
  }

  get name() {
    return this._name;
  }

  /** true when this SimpleBox created its box, false when it reused one (reuseExisting), null before. */
  get created() {
    return this._created;
  }

  /** The underlying box handle (JsBox), or null before it exists. */
  get box() {
    return this._box;
  }

  /** Tunnels to ports in the box (creating and starting it if needed). */
  get network() {
    return new NetworkHandle(() => this._ensureBox());
  }

  /** Prepares a one-shot tunnel to a TCP port inside this box. */
  async tunnel(port) {
    return this.network.tunnel(port);
  }

  /** The underlying box handle, creating the box if needed. */
  async getBox() {
    return this._ensureBox();
  }

  /** Box metadata; rejects before the box exists (use getInfo()). */
  async info() {
    if (!this._box) throw new BoxliteError('Box not yet created. Call exec() first.', { code: 'invalid_state' });
    return this._box.info();
  }

  async getInfo() {
    return (await this._ensureBox()).info();
  }

  /** The box's metrics (see JsBox.metrics); rejects before the box exists. */
  async metrics() {
    if (!this._box) throw new BoxliteError('Box not yet created. Call exec() first.', { code: 'invalid_state' });
    return this._box.metrics();
  }

  /** Pauses the box with its memory (see JsBox.pause); the next call resumes it. */
  async pause() {
    if (!this._box) throw new BoxliteError('Box not yet created. Call exec() first.', { code: 'invalid_state' });
    return this._box.pause();
  }

  /** Resumes a paused box (see JsBox.resume). */
  async resume() {
    if (!this._box) throw new BoxliteError('Box not yet created. Call exec() first.', { code: 'invalid_state' });
    return this._box.resume();
  }

  /**
   * Runs a command and collects its output: {exitCode, stdout, stderr,
   * stdoutTruncated, stderrTruncated}. A non-zero exit is a result, not an
   * error; a command that does not exist rejects with code "not_found"; a
   * timeout rejects with TimeoutError. At most outputLimitBytes per stream
   * (default: the runtime's, 64 MiB) is kept; the rest is read and dropped,
   * and stdoutTruncated / stderrTruncated say so (nothing rejects).
   *
   *   exec(cmd, ...args)
   *   exec(cmd, ...args, env)                      env: {K: V}
   *   exec(cmd, args[], env?, { cwd, user, timeoutSecs, outputLimitBytes })
   */
  async exec(cmd, ...rest) {
    const c = parseExec(cmd, rest);
    return this._collect(c.argv, c);
  }

  /** Copies a host file or directory into the box (docker cp); see Box.copyIn. */
  async copyIn(hostPath, containerDest, options) {
    return (await this._ensureBox()).copyIn(hostPath, containerDest, options);
  }

  /** Copies a box path to the host (docker cp); see Box.copyOut. */
  async copyOut(containerSrc, hostDest, options) {
    return (await this._ensureBox()).copyOut(containerSrc, hostDest, options);
  }

  /** Starts a command and returns its Execution, to stream output or write stdin. */
  async spawn(cmd, args = [], options = {}) {
    checkString(cmd, 'cmd');
    const o = execOptions(options);
    const box = await this._ensureBox();
    return box.exec({ argv: [cmd, ...checkArgs(args)], stdin: false, ...o });
  }

  /** @internal */
  async _collect(argv, o) {
    const box = await this._ensureBox();
    const { env, cwd, user, timeoutSecs, tty, rows, cols } = o;
    const ex = await box.exec({ argv, env, cwd, user, timeoutSecs, tty, rows, cols, stdin: false });
    const limit = o.outputLimitBytes ?? this._runtime.outputLimitBytes;
    try {
      const [out, err] = await Promise.all([collectCapped(ex.stdout, limit), collectCapped(ex.stderr, limit)]);
      const x = await ex.wait();
      if (x.timedOut) {
        throw new TimeoutError(`exec ${JSON.stringify(argv)}: timed out after ${o.timeoutSecs}s`, {
          command: argv.join(' '), exitCode: x.exitCode, stdout: out.text, stderr: err.text,
        });
      }
      return {
        exitCode: x.exitCode, stdout: out.text, stderr: err.text,
        stdoutTruncated: out.truncated, stderrTruncated: err.truncated,
      };
    } finally {
      ex.close();
    }
  }

  /** Stops the box (removing it unless autoRemove: false). Does nothing if it was never created. */
  stop() {
    if (this._stopping) return this._stopping;
    const p = this._boxPromise;
    this._stopped = true;
    this._stopping = (async () => {
      if (!p) return;
      let box;
      try {
        box = await p;
      } catch {
        return; // it never came up
      }
      try {
        await box.stop();
      } finally {
        box.close();
      }
    })();
    return this._stopping;
  }

  async [Symbol.asyncDispose]() {
    await this.stop();
  }
}

function camelOptions(c) {
  const o = { image: c.image };
  if (c.cpus !== undefined) o.cpus = c.cpus;
  if (c.memory_mib !== undefined) o.memoryMib = c.memory_mib;
  if (c.disk_size_gb !== undefined) o.diskSizeGb = c.disk_size_gb;
  if (c.env !== undefined) o.env = c.env;
  if (c.working_dir !== undefined) o.workingDir = c.working_dir;
  if (c.user !== undefined) o.user = c.user;
  if (c.hostname !== undefined) o.hostname = c.hostname;
  if (c.prestart !== undefined) o.prestart = c.prestart;
  if (c.auto_remove !== undefined) o.autoRemove = c.auto_remove;
  if (c.detach !== undefined) o.detach = c.detach;
  if (c.entrypoint !== undefined) o.entrypoint = c.entrypoint;
  if (c.cmd !== undefined) o.cmd = c.cmd;
  if (c.boot_timeout_secs !== undefined) o.bootTimeoutSecs = c.boot_timeout_secs;
  if (c.auto_pause_secs !== undefined) o.autoPauseSecs = c.auto_pause_secs;
  if (c.secrets !== undefined) o.secrets = c.secrets; // {name, value, hosts, placeholder?}: the plain form boxOptions takes
  if (c.network !== undefined) o.network = camelNetwork(c.network);
  if (c.ports !== undefined) {
    o.ports = c.ports.map((p) => ({ hostPort: p.host_port, guestPort: p.guest_port, protocol: p.protocol, hostIp: p.host_ip }));
  }
  if (c.volumes !== undefined) o.volumes = c.volumes.map((v) => ({ hostPath: v.host_path, guestPath: v.guest_path, readOnly: !!v.read_only }));
  return o;
}

/** The C ABI's network object (flat or split) back in the SDK's camelCase, every key kept. */
function camelNetwork(n) {
  const dir = (d) => (d.allow_net !== undefined ? { mode: d.mode, allowNet: d.allow_net } : { mode: d.mode });
  if (n.outbound !== undefined || n.inbound !== undefined) {
    const o = {};
    if (n.outbound !== undefined) o.outbound = dir(n.outbound);
    if (n.inbound !== undefined) o.inbound = dir(n.inbound);
    return o;
  }
  return dir(n);
}

/** exec()'s argument forms as {argv, env, ...options}. */
function parseExec(cmd, rest) {
  checkString(cmd, 'cmd');
  if (rest.length && Array.isArray(rest[0])) {
    if (rest.length > 3) throw new TypeError('exec(cmd, args[], env?, options?) takes at most 4 arguments');
    const args = checkArgs(rest[0], 'args');
    const o = execOptions(rest[2], 'options');
    const env = normalizeEnv(rest[1], 'env');
    return { ...o, env: env ?? o.env, argv: [cmd, ...args] };
  }
  const args = rest.slice();
  let env;
  if (args.length && isPlainObject(args[args.length - 1])) env = normalizeEnv(args.pop(), 'env');
  checkArgs(args, 'args');
  return { env, argv: [cmd, ...args] };
}

module.exports = { SimpleBox, parseExec };
