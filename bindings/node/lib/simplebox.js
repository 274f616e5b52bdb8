'use strict';
// SimpleBox, CodeBox and InteractiveBox: BoxLite's convenience classes. The
// box is created lazily on first use and stopped by stop() or `await using`.
const { JsBoxlite } = require('./runtime');
const { BoxliteError, ExecError, TimeoutError } = require('./errors');
const { collectCapped } = require('./execution');
const { boxOptions, execOptions, checkArgs, checkString, normalizeEnv, isPlainObject, typeOf } = require('./options');
const { PythonSession, ShellSession, CellStream, truncationMarker } = require('./session');

const SDK_KEYS = ['runtime', 'reuseExisting'];

class SimpleBox {
  /**
   * new SimpleBox({ image, memoryMib, cpus, diskSizeGb, name, autoRemove (default true),
   *                 workingDir, env, user, bootTimeoutSecs, network, ports, runtime, reuseExisting })
   */
  constructor(options = {}) {
    if (!isPlainObject(options)) throw new TypeError(`options must be an object, got ${typeOf(options)}`);
    this._boxOpts = boxOptions({ autoRemove: true, ...options }, 'options', SDK_KEYS);
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
  if (c.network !== undefined) o.network = { mode: c.network.mode, allowNet: c.network.allow_net };
  if (c.ports !== undefined) {
    o.ports = c.ports.map((p) => ({ hostPort: p.host_port, guestPort: p.guest_port, protocol: p.protocol, hostIp: p.host_ip }));
  }
  if (c.volumes !== undefined) o.volumes = c.volumes.map((v) => ({ hostPath: v.host_path, guestPath: v.guest_path, readOnly: !!v.read_only }));
  return o;
}

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

class CodeBox extends SimpleBox {
  /**
   * new CodeBox({ image = 'python:slim', ...SimpleBox options })
   *
   * run() talks to one long-lived Python interpreter in the box (a session):
   * variables, imports and definitions of one call are there for the next.
   */
  constructor(options = {}) {
    // A box started from a template finds run()'s interpreter started.
    super(isPlainObject(options) && options.prestart === undefined ? { ...options, prestart: ['python'] } : options);
    this._session = null; // Promise of the default session
    this._sessions = [];
  }

  _defaultImage() {
    return 'python:slim';
  }

  /** The default session that run() uses, started on first use. */
  session() {
    if (!this._session) {
      this._session = this.newSession();
      this._session.catch(() => {
        this._session = null; // a later call tries again
      });
    }
    return this._session.then((s) => {
      if (!s.closed) return s;
      this._session = null;
      return this.session();
    });
  }

  /**
   * Starts another interpreter in the box, independent of run()'s.
   * options: { env, cwd, user, graceSecs (default 3: how long an interrupted
   * cell has to stop before the interpreter is killed and restarted), python }.
   */
  async newSession(options) {
    const box = await this._ensureBox();
    const s = await PythonSession._start(box, options);
    this._sessions = this._sessions.filter((x) => !x.closed).concat(s);
    return s;
  }

  /**
   * Runs Python code as a cell of the session; resolves to its stdout.
   * Rejects with ExecError (exitCode, stderr with the traceback, stdout) when
   * the code fails, TimeoutError on a timeout (the session keeps its state,
   * unless the cell ignored the interrupt: then the interpreter was restarted
   * and the message says so). options: { timeoutSecs } (or timeout, in
   * seconds). With env, cwd or user the code runs in a fresh `python3 -c`
   * instead, outside the session.
   */
  async run(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    const o = execOptions(options, 'options');
    if (o.env !== undefined || o.cwd !== undefined || o.user !== undefined) {
      const r = await this._collect(['python3', '-c', code], {
        timeoutSecs: o.timeoutSecs, env: o.env, cwd: o.cwd, user: o.user, outputLimitBytes: o.outputLimitBytes,
      });
      if (r.exitCode !== 0) throw new ExecError('run()', r.exitCode, r.stderr, { stdout: r.stdout });
      return r.stdout + truncationMarker(r.stdoutTruncated, false, o.outputLimitBytes ?? this._runtime.outputLimitBytes);
    }
    const r = await this.runCell(code, options);
    if (r.error) throw new ExecError('run()', r.exitCode, r.stderr + r.error.traceback, { stdout: r.stdout });
    return r.stdout + truncationMarker(r.stdoutTruncated, false, r.outputLimitBytes);
  }

  /**
   * Runs a cell; resolves to {stdout, stderr, value (repr of a trailing
   * expression, as a notebook shows it, or null), error: {type, message,
   * traceback} | null, exitCode, timedOut, restarted}. An exception is a
   * result, not a rejection; a timeout rejects with TimeoutError (`result`).
   */
  async runCell(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    return (await this.session()).runCell(code, options);
  }

  /**
   * A cell whose output arrives while it runs:
   *   const cell = codebox.stream(code);
   *   for await (const { stream, text } of cell) process.stdout.write(text);
   *   const result = await cell.result();
   */
  stream(code, options) {
    return new CellStream(() => this.session(), code, options);
  }

  /** Restarts run()'s interpreter: all its state is gone. */
  async reset() {
    await (await this.session()).reset();
  }

  stop() {
    const sessions = this._sessions;
    this._sessions = [];
    this._session = null;
    for (const s of sessions) s.close();
    return super.stop();
  }

  /** Runs a Python script file of the host. */
  async runScript(scriptPath) {
    checkString(scriptPath, 'scriptPath');
    const code = await require('node:fs/promises').readFile(scriptPath, 'utf8');
    return this.run(code);
  }

  /** pip install; rejects with ExecError when pip fails. */
  async installPackage(packageName) {
    checkString(packageName, 'packageName');
    return this._pip([packageName], `installPackage('${packageName}')`);
  }

  async installPackages(...packages) {
    checkArgs(packages, 'packages');
    if (!packages.length) throw new TypeError('installPackages needs at least one package');
    return this._pip(packages, `installPackages(${packages.join(', ')})`);
  }

  async _pip(packages, what) {
    const r = await this._collect(['python3', '-m', 'pip', 'install', '--quiet', ...packages], {});
    if (r.exitCode !== 0) throw new ExecError(what, r.exitCode, r.stderr, { stdout: r.stdout });
    return r.stdout;
  }
}

class InteractiveBox extends SimpleBox {
  /**
   * new InteractiveBox({ shell = '/bin/sh', tty, ...SimpleBox options })
   *
   * tty (default: whether this process's stdin is a terminal, as in BoxLite):
   * start() runs the shell on a terminal in the box, sized like this one, and
   * hands this terminal to it: stdin in raw mode (every key goes to the box,
   * ^C and ^D included), the box's output to stdout, resizes followed. wait()
   * resolves when the shell exits; the terminal is restored then (or by
   * stop()). With tty false, start() runs the shell with plain pipes
   * (execution.stdin / stdout) for a program to drive.
   */
  constructor(options = {}) {
    if (!isPlainObject(options)) throw new TypeError(`options must be an object, got ${typeOf(options)}`);
    const { shell = '/bin/sh', tty, ...rest } = options;
    if (tty !== undefined && tty !== null && typeof tty !== 'boolean') throw new TypeError(`options.tty must be a boolean, got ${typeOf(tty)}`);
    const onTty = tty ?? !!process.stdin.isTTY;
    if (!onTty && typeof shell === 'string' && shell.startsWith('/') && rest.prestart === undefined) {
      // A box started from a template finds exec()'s shell started.
      rest.prestart = [shell === '/bin/sh' ? 'shell' : `shell:${shell}`];
    }
    super(rest);
    this._shell = checkString(shell, 'options.shell');
    this._tty = onTty;
    this._execution = null;
    this._forwarding = null; // Promise of the terminal hand-over, with tty
    this._sh = null; // Promise of the shell session exec() runs in
  }

  /** Whether start() hands the terminal over. */
  get tty() {
    return this._tty;
  }

  /** The live shell that exec() runs in, started on first use. */
  shellSession() {
    if (!this._sh) {
      this._sh = this._ensureBox().then((box) => ShellSession._start(box, { shell: this._shell }));
      this._sh.catch(() => {
        this._sh = null;
      });
    }
    return this._sh.then((s) => {
      if (!s.closed) return s;
      this._sh = null;
      return this.shellSession();
    });
  }

  /**
   * Runs a command in the box's live shell: the working directory, exported
   * and shell variables and functions of one exec are there for the next
   * (exec('eval', script) runs shell code). Each argument is one word; stdin
   * is /dev/null; env is for this command only. Same forms and result as
   * SimpleBox.exec; with cwd, user or tty the command runs outside the shell.
   */
  async exec(cmd, ...rest) {
    const c = parseExec(cmd, rest);
    if (c.cwd !== undefined || c.user !== undefined || c.tty) return super.exec(cmd, ...rest);
    const sh = await this.shellSession();
    try {
      return await sh.exec(c.argv, { env: c.env, timeoutSecs: c.timeoutSecs, outputLimitBytes: c.outputLimitBytes });
    } catch (e) {
      if (e instanceof TimeoutError) {
        const restarted = /restarted/.test(e.message) ? '; it ignored SIGINT, so the shell was restarted (working directory and variables reset)' : '';
        throw new TimeoutError(`exec ${JSON.stringify(c.argv)}: timed out after ${c.timeoutSecs}s${restarted}`, {
          command: c.argv.join(' '), exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr, cause: e,
        });
      }
      throw e;
    }
  }

  /** Restarts exec()'s shell: working directory and variables back to the start. */
  async reset() {
    if (this._sh) await (await this.shellSession()).reset();
  }

  /** Starts the shell: on a terminal handed this one with tty, else on pipes. */
  async start() {
    if (this._execution) return;
    const box = await this._ensureBox();
    if (!this._tty) {
      this._execution = await box.exec({ argv: [this._shell], stdin: true });
      return;
    }
    const out = process.stdout;
    const size = out.isTTY ? { rows: out.rows, cols: out.columns } : {};
    this._execution = await box.exec({ argv: [this._shell], stdin: true, tty: true, ...size });
    this._forwarding = forwardTerminal(this._execution);
  }

  /** The shell's Execution (stdin, stdout, stderr), once started. */
  get execution() {
    return this._execution;
  }

  /** Writes to the shell's stdin. */
  async write(data) {
    return this._started('write').stdin.write(data);
  }

  async closeStdin() {
    return this._started('closeStdin').stdin.close();
  }

  /** Waits for the shell to exit (with tty, the terminal is restored first); resolves to {exitCode, signal, timedOut}. */
  async wait() {
    const ex = this._started('wait');
    if (this._forwarding) await this._forwarding;
    return ex.wait();
  }

  _started(op) {
    if (!this._execution) throw new BoxliteError(`${op}: call start() first`, { code: 'invalid_state' });
    return this._execution;
  }

  async stop() {
    if (this._execution) this._execution.close();
    if (this._forwarding) await this._forwarding.catch(() => {}); // restores the terminal
    const sh = this._sh;
    this._sh = null;
    if (sh) {
      try {
        (await sh).close();
      } catch {
        // it never started
      }
    }
    return super.stop();
  }
}

/**
 * Connects process.stdin/stdout to a tty execution until it ends: raw mode
 * while it runs (restored after, even on failure), keys to its stdin,
 * output to stdout, this terminal's resizes to it.
 */
async function forwardTerminal(ex) {
  const input = process.stdin;
  const out = process.stdout;
  const raw = !!input.isTTY && typeof input.setRawMode === 'function';
  const stdin = ex.stdin;
  let typing = Promise.resolve();
  // The end of input types ^D, which a shell only sees as EOF once its line
  // editor reads (typed earlier, the terminal's mode change can drop it):
  // so not before its first output.
  let shown;
  let timer = null;
  const firstOutput = new Promise((resolve) => {
    shown = resolve;
  });
  const onData = (b) => {
    typing = typing.then(() => stdin.write(b)).catch(() => {}); // the shell has exited
  };
  const onEnd = () => {
    typing = typing.then(() => firstOutput).then(() => stdin.close()).catch(() => {});
  };
  const onResize = () => {
    ex.resizeTty(out.rows, out.columns).catch(() => {});
  };
  if (raw) input.setRawMode(true);
  input.on('data', onData);
  input.on('end', onEnd);
  input.resume();
  if (out.isTTY) out.on('resize', onResize);
  try {
    for await (const b of ex.stdout.buffers()) {
      if (!out.write(b)) await new Promise((resolve) => out.once('drain', resolve));
      timer ??= setTimeout(shown, 200); // once: the prompt is out, the line editor set up
    }
  } finally {
    clearTimeout(timer);
    shown();
    if (out.isTTY) out.off('resize', onResize);
    input.off('data', onData);
    input.off('end', onEnd);
    input.pause();
    if (raw) input.setRawMode(false);
  }
}

module.exports = { SimpleBox, CodeBox, InteractiveBox };
