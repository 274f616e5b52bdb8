'use strict';
// SimpleBox: BoxLite's convenience class (CodeBox and InteractiveBox extend
// it). The box is created lazily on first use and stopped by stop() or
// `await using`.
const { JsBoxlite } = require('./runtime');
const { BoxliteError } = require('./errors');
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
    const checked = boxOptions(options, 'options', SDK_KEYS); // every key and value checked now, not at first use
    // The options as given (minus the SDK's own), for runtime.create: no
    // round trip through the wire form that could drop one.
    const { runtime: _rt, reuseExisting: _re, name, ...boxOpts } = options;
    this._boxOpts = boxOpts;
    if (checked.image === undefined) this._boxOpts.image = this._defaultImage();
    const rt = options.runtime;
    if (rt !== undefined && rt !== null && !(rt instanceof JsBoxlite)) {
      throw new TypeError('options.runtime must be a JsBoxlite runtime');
    }
    this._runtime = rt || JsBoxlite.withDefaultConfig();
    this._name = checked.name;
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
      const opts = this._boxOpts;
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
   * count running copies of this box at one instant (JsBox.fork), each
   * wrapped as this class: a CodeBox's fork runs run() in its copy of the
   * interpreter (the same variables), an InteractiveBox's in its copy of the
   * shell. Each fork is stopped (removed, with autoRemove) by its own stop().
   */
  async fork(count = 1, names = []) {
    const box = await this._ensureBox();
    const boxes = await box.fork(count, names);
    return boxes.map((b) => {
      const f = Object.assign(Object.create(Object.getPrototypeOf(this)), this);
      f._box = b;
      f._boxPromise = Promise.resolve(b);
      f._name = b.name ?? undefined;
      f._created = true;
      f._stopped = false;
      f._stopping = null;
      f._initSessions();
      return f;
    });
  }

  /** @internal Fresh session state for a fork; CodeBox and InteractiveBox keep theirs. */
  _initSessions() {}

  /**
   * Runs a command and collects its output: {exitCode, stdout, stderr,
   * stdoutTruncated, stderrTruncated}. A non-zero exit is a result, not an
   * error; a command that does not exist rejects with code "not_found"; a
   * timeout kills the command and resolves, as BoxLite 0.10's does, with
   * timedOut: true, a non-zero exitCode (-15, or -9 when it outlived the
   * grace period) and errorMessage, keeping the output so far. At most outputLimitBytes per stream
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

  /** Copies a host file or directory into the box (BoxLite's layout: a directory lands inside the destination); see Box.copyIn. */
  async copyIn(hostPath, containerDest, options) {
    return (await this._ensureBox()).copyIn(hostPath, containerDest, options);
  }

  /** Copies a box path to the host (BoxLite's layout); see Box.copyOut. */
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
      const r = {
        exitCode: x.exitCode, stdout: out.text, stderr: err.text,
        stdoutTruncated: out.truncated, stderrTruncated: err.truncated,
      };
      if (x.timedOut) {
        // A result, as BoxLite 0.10's SimpleBox.exec: exitCode -15 (or -9 past the grace period).
        r.timedOut = true;
        r.errorMessage = `exec ${JSON.stringify(argv)}: timed out after ${o.timeoutSecs}s`;
      }
      return r;
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
