'use strict';
// Persistent sessions: a live Python interpreter (PythonSession) or shell
// (ShellSession) in a box; CodeBox.run and InteractiveBox.exec use them.
//
// One Session class, parameterised by kind, owns what every kind does the
// same way (start with its options, interrupt, reset, info, close); a kind
// adds only how it runs something: Python runs cells (CellStream, ./cell),
// a shell runs commands.
const raw = require('./raw');
const { CellStream, cellResult, truncationMarker, call, convert, closed } = require('./cell');
const { checkArgs, checkSeconds, checkString, execOptions, normalizeEnv, isPlainObject, typeOf } = require('./options');

/**
 * Session options {env, cwd, user, graceSecs, name} (+ python or shell) as
 * the C ABI's JSON. name (1-48 of [A-Za-z0-9_-], local runtimes only): the
 * session's process outlives it, and a later session of that kind and name
 * in the box (another process, after a pause, a fork) takes it over.
 */
function sessionOptions(o, where, extra) {
  if (o === undefined || o === null) return null;
  if (!isPlainObject(o)) throw new TypeError(`${where} must be an object, got ${typeOf(o)}`);
  const known = ['env', 'cwd', 'user', 'graceSecs', 'name', extra];
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
  const c = {};
  const env = normalizeEnv(o.env, `${where}.env`);
  if (env && Object.keys(env).length) c.env = env;
  if (o.cwd != null) c.cwd = checkString(o.cwd, `${where}.cwd`);
  if (o.user != null) c.user = checkString(o.user, `${where}.user`);
  if (o.graceSecs != null) c.grace_secs = checkSeconds(o.graceSecs, `${where}.graceSecs`); // the library refuses <= 0
  if (o.name != null) c.name = checkString(o.name, `${where}.name`);
  if (o[extra] != null) c[extra] = checkString(o[extra], `${where}.${extra}`);
  return JSON.stringify(c);
}


/** A live session of a kind (the subclass's static `kind`) in a box. */
class Session {
  /** @internal */
  constructor(box, handle) {
    this._box = box; // keeps the box handle alive
    this._h = handle;
    this._closed = false;
  }

  /** @internal Starts a session of this class's kind in a JsBox; options as sessionOptions, plus the kind's own (python, shell). */
  static async _start(box, options) {
    const json = sessionOptions(options, 'options', this.kind);
    const h = await call(raw.sessionNew, box._handle('session'), this.kind, json);
    return new this(box, h);
  }

  _handle() {
    if (this._closed) throw closed(`${this.constructor.kind} session`);
    return this._h;
  }

  get closed() {
    return this._closed;
  }

  /** Interrupts what runs now, if anything (SIGINT: KeyboardInterrupt in Python). */
  interrupt() {
    try {
      raw.sessionInterrupt(this._handle());
    } catch (e) {
      throw convert(e);
    }
  }

  /** Starts afresh: a new interpreter, or a shell with its working directory and variables back to the start. */
  async reset() {
    await call(raw.sessionReset, this._handle());
  }

  /** {kind, pid, restarts} (and python for a Python session). */
  info() {
    try {
      return JSON.parse(raw.sessionInfo(this._handle()));
    } catch (e) {
      throw convert(e);
    }
  }

  /** Stops the session. Idempotent. */
  close() {
    if (this._closed) return;
    this._closed = true;
    raw.sessionFree(this._h);
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }
}

/** A live Python interpreter in a box (CodeBox.newSession()). Cells take turns. */
class PythonSession extends Session {
  static kind = 'python';

  /**
   * Runs a cell; resolves to its stdout (and, when it failed, its stderr and
   * traceback), then the truncation line when output was dropped.
   */
  async run(code, options) {
    const r = await this.runCell(code, options);
    const text = r.error ? r.stdout + r.stderr + r.error.traceback : r.stdout;
    return text + truncationMarker(r.stdoutTruncated, r.stderrTruncated && !!r.error, r.outputLimitBytes);
  }

  /** Runs a cell; resolves to {stdout, stderr, value, error, exitCode, timedOut, restarted, stdoutTruncated, stderrTruncated}. */
  async runCell(code, options) {
    const cell = this.stream(code, options);
    try {
      return await cell.result();
    } finally {
      cell.close();
    }
  }

  /** A cell whose output can be iterated while it runs. */
  stream(code, options) {
    return new CellStream(async () => this, code, options);
  }
}

/** A live shell in a box (InteractiveBox.exec runs in one). Commands take turns. */
class ShellSession extends Session {
  static kind = 'shell';

  /**
   * Runs argv in the shell, each argument one word (['eval', script] runs
   * shell code): {exitCode, stdout, stderr, stdoutTruncated,
   * stderrTruncated}. options: {env (this command only), timeoutSecs,
   * outputLimitBytes (default: the runtime's, 64 MiB per stream; the library
   * drops the rest)}. A timeout rejects with TimeoutError (stdout, stderr so
   * far).
   */
  async exec(argv, options) {
    checkArgs(argv, 'argv');
    if (!argv.length) throw new TypeError('argv must not be empty');
    const o = execOptions(options, 'options');
    if (o.cwd !== undefined || o.user !== undefined || o.tty || o.stdin) {
      throw new TypeError('a shell session command takes only env, a timeout and outputLimitBytes');
    }
    const c = { argv };
    if (o.env && Object.keys(o.env).length) c.env = o.env;
    if (o.timeoutSecs) c.timeout_secs = o.timeoutSecs;
    if (o.outputLimitBytes !== undefined) c.output_limit_bytes = o.outputLimitBytes; // absent: the runtime's
    const r = await call(raw.sessionExec, this._handle(), JSON.stringify(c));
    return {
      exitCode: r.exitCode, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'),
      stdoutTruncated: !!r.stdoutTruncated, stderrTruncated: !!r.stderrTruncated,
    };
  }
}

module.exports = { Session, PythonSession, ShellSession, CellStream, cellResult, truncationMarker };
