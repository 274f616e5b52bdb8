'use strict';
// Persistent sessions: a live Python interpreter (PythonSession) or shell
// (ShellSession) in a box; CodeBox.run and InteractiveBox.exec use them.
//
// A cell is read like an execution's output: cellRead with timeout 0, and
// cellWatchFd (the addon's poller thread) to wait, so a running cell holds
// no libuv pool thread; its result is taken once its output has ended.
const { StringDecoder } = require('node:string_decoder');
const raw = require('./raw');
const { BoxliteError, TimeoutError, fromNative } = require('./errors');
const { checkArgs, checkString, execOptions, normalizeEnv, isPlainObject, typeOf } = require('./options');

const CHUNK = 64 << 10;

/** The library's cell result JSON as {stdout, stderr, value, error, exitCode, timedOut, restarted}. */
function cellResult(json) {
  const j = json ? JSON.parse(json) : {};
  return {
    stdout: j.stdout ?? '',
    stderr: j.stderr ?? '',
    value: j.value ?? null,
    error: j.error ? { type: j.error.type, message: j.error.message, traceback: j.error.traceback } : null,
    exitCode: j.exit_code ?? 0,
    timedOut: !!j.timed_out,
    restarted: !!j.restarted,
  };
}

/** A raw-layer error as the SDK's; a timeout keeps the partial result. */
function convert(e) {
  const err = fromNative(e);
  if (err instanceof TimeoutError && e && typeof e.resultJson === 'string') {
    const r = cellResult(e.resultJson);
    err.result = r;
    err.stdout = r.stdout;
    err.stderr = r.stderr;
    err.restarted = r.restarted;
  }
  return err;
}

async function call(fn, ...args) {
  try {
    return await fn(...args);
  } catch (e) {
    throw convert(e);
  }
}

function timeoutMs(o) {
  return o.timeoutSecs ? Math.max(1, Math.round(o.timeoutSecs * 1000)) : 0;
}

function closed(what) {
  return new BoxliteError(`${what} is closed`, { code: 'closed' });
}

/** Session options {env, cwd, user, graceSecs} (+ python or shell) as the C ABI's JSON. */
function sessionOptions(o, where, extra) {
  if (o === undefined || o === null) return null;
  if (!isPlainObject(o)) throw new TypeError(`${where} must be an object, got ${typeOf(o)}`);
  const known = ['env', 'cwd', 'user', 'graceSecs', extra];
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
  const c = {};
  const env = normalizeEnv(o.env, `${where}.env`);
  if (env && Object.keys(env).length) c.env = env;
  if (o.cwd != null) c.cwd = checkString(o.cwd, `${where}.cwd`);
  if (o.user != null) c.user = checkString(o.user, `${where}.user`);
  if (o.graceSecs != null) {
    if (typeof o.graceSecs !== 'number' || !(o.graceSecs > 0) || !Number.isFinite(o.graceSecs)) {
      throw new RangeError(`${where}.graceSecs must be a number of seconds > 0`);
    }
    c.grace_secs = o.graceSecs;
  }
  if (o[extra] != null) c[extra] = checkString(o[extra], `${where}.${extra}`);
  return JSON.stringify(c);
}

/**
 * A cell whose output is read while it runs: an async iterable of
 * {stream: 'stdout' | 'stderr', text}, then `await cell.result()`. The cell
 * starts on first use; output not read holds it back (as a pipe would)
 * until result() collects the rest.
 */
class CellStream {
  /** @internal */
  constructor(getSession, code, options) {
    checkString(code, 'code', { allowEmpty: true });
    const o = execOptions(options, 'options');
    this._getSession = getSession;
    this._code = code;
    this._timeoutMs = timeoutMs(o);
    this._h = null;
    this._starting = null;
    this._eof = false;
    this._closed = false;
    this._result = undefined;
    this._decoders = { 1: new StringDecoder('utf8'), 2: new StringDecoder('utf8') };
    this._rest = { 1: [], 2: [] }; // output read by result(), not handed out
  }

  async _handle() {
    if (this._closed) throw closed('cell');
    if (!this._h) {
      if (!this._starting) {
        this._starting = (async () => {
          const s = await this._getSession();
          return call(raw.sessionRunStart, s._handle(), this._code, this._timeoutMs);
        })();
      }
      const h = await this._starting;
      if (this._closed) {
        raw.cellFree(h);
        throw closed('cell');
      }
      this._h = h;
    }
    return this._h;
  }

  /** The next output chunk as a Buffer with its stream (1 or 2), or null at the end. */
  async _next() {
    const h = await this._handle();
    while (!this._eof) {
      if (this._closed) throw closed('cell');
      let r;
      try {
        r = raw.cellRead(h, CHUNK, 0);
      } catch (e) {
        throw convert(e);
      }
      if (typeof r !== 'number') return r;
      if (r === raw.EOF) {
        this._eof = true;
        break;
      }
      try {
        await raw.cellWatchFd(h);
      } catch (e) {
        if (this._closed) throw closed('cell');
        throw convert(e);
      }
    }
    return null;
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      const c = await this._next();
      if (c === null) break;
      const text = this._decoders[c.stream].write(c.data);
      if (text) yield { stream: c.stream === raw.STDOUT ? 'stdout' : 'stderr', text };
    }
    for (const fd of [1, 2]) {
      const tail = this._decoders[fd].end();
      if (tail) yield { stream: fd === raw.STDOUT ? 'stdout' : 'stderr', text: tail };
    }
  }

  /**
   * Waits for the cell to end: {stdout, stderr (what iteration did not
   * return), value, error: {type, message, traceback} | null, exitCode,
   * timedOut, restarted}. A timeout rejects with TimeoutError (`result`: the
   * same, so far).
   */
  async result() {
    if (this._result !== undefined) return this._result;
    const h = await this._handle();
    for (;;) {
      const c = await this._next();
      if (c === null) break;
      this._rest[c.stream].push(c.data);
    }
    let json;
    try {
      json = raw.cellResult(h, 0); // the output has ended, so the cell has
      if (json === raw.AGAIN) json = await raw.cellResult(h, -1);
    } catch (e) {
      const err = convert(e);
      if (err.result) {
        this._merge(err.result);
        err.stdout = err.result.stdout;
        err.stderr = err.result.stderr;
      }
      throw err;
    }
    this._result = this._merge(cellResult(json));
    this._free();
    return this._result;
  }

  _merge(r) {
    r.stdout = Buffer.concat(this._rest[1]).toString('utf8') + r.stdout;
    r.stderr = Buffer.concat(this._rest[2]).toString('utf8') + r.stderr;
    return r;
  }

  /** Interrupts the cell now (KeyboardInterrupt), as its timeout would. */
  async interrupt() {
    const h = await this._handle();
    try {
      raw.cellInterrupt(h);
    } catch (e) {
      throw convert(e);
    }
  }

  _free() {
    if (this._h) raw.cellFree(this._h);
  }

  /** Releases the cell; one still running is interrupted. */
  close() {
    this._closed = true;
    this._free();
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }
}

/** A live Python interpreter in a box (CodeBox.newSession()). Cells take turns. */
class PythonSession {
  /** @internal */
  constructor(box, handle) {
    this._box = box; // keeps the box handle alive
    this._h = handle;
    this._closed = false;
  }

  /** @internal Starts an interpreter in a JsBox. */
  static async _start(box, options) {
    const json = sessionOptions(options, 'options', 'python');
    const h = await call(raw.sessionNew, box._handle('session'), 'python', json);
    return new PythonSession(box, h);
  }

  _handle() {
    if (this._closed) throw closed('python session');
    return this._h;
  }

  get closed() {
    return this._closed;
  }

  /** Runs a cell; resolves to its stdout. A failing cell rejects (see CodeBox.run). */
  async run(code, options) {
    const r = await this.runCell(code, options);
    return r.error ? r.stdout + r.stderr + r.error.traceback : r.stdout;
  }

  /** Runs a cell; resolves to {stdout, stderr, value, error, exitCode, timedOut, restarted}. */
  async runCell(code, options) {
    const cell = new CellStream(async () => this, code, options);
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

  /** Interrupts the running cell, if any. */
  interrupt() {
    try {
      raw.sessionInterrupt(this._handle());
    } catch (e) {
      throw convert(e);
    }
  }

  /** Starts a fresh interpreter: all state is gone. */
  async reset() {
    await call(raw.sessionReset, this._handle());
  }

  /** {kind: 'python', pid, restarts, python}. */
  info() {
    return JSON.parse(raw.sessionInfo(this._handle()));
  }

  /** Stops the interpreter. Idempotent. */
  close() {
    if (this._closed) return;
    this._closed = true;
    raw.sessionFree(this._h);
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }
}

/** A live shell in a box (InteractiveBox.exec runs in one). Commands take turns. */
class ShellSession {
  /** @internal */
  constructor(box, handle) {
    this._box = box;
    this._h = handle;
    this._closed = false;
  }

  /** @internal */
  static async _start(box, options) {
    const json = sessionOptions(options, 'options', 'shell');
    const h = await call(raw.sessionNew, box._handle('session'), 'shell', json);
    return new ShellSession(box, h);
  }

  _handle() {
    if (this._closed) throw closed('shell session');
    return this._h;
  }

  get closed() {
    return this._closed;
  }

  /**
   * Runs argv in the shell, each argument one word (['eval', script] runs
   * shell code): {exitCode, stdout, stderr}. options: {env (this command
   * only), timeoutSecs}. A timeout rejects with TimeoutError (stdout,
   * stderr so far).
   */
  async exec(argv, options) {
    checkArgs(argv, 'argv');
    if (!argv.length) throw new TypeError('argv must not be empty');
    const o = execOptions(options, 'options');
    if (o.cwd !== undefined || o.user !== undefined || o.tty || o.stdin) {
      throw new TypeError('a shell session command takes only env and a timeout');
    }
    const c = { argv };
    if (o.env && Object.keys(o.env).length) c.env = o.env;
    if (o.timeoutSecs) c.timeout_secs = o.timeoutSecs;
    let r;
    try {
      r = await raw.sessionExec(this._handle(), JSON.stringify(c));
    } catch (e) {
      const err = fromNative(e);
      if (err instanceof TimeoutError && e.result) {
        err.stdout = e.result.stdout.toString('utf8');
        err.stderr = e.result.stderr.toString('utf8');
        err.exitCode = e.result.exitCode;
      }
      throw err;
    }
    return { exitCode: r.exitCode, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8') };
  }

  /** Interrupts the running command, if any. */
  interrupt() {
    raw.sessionInterrupt(this._handle());
  }

  /** Starts a fresh shell (working directory and variables back to the start). */
  async reset() {
    await call(raw.sessionReset, this._handle());
  }

  info() {
    return JSON.parse(raw.sessionInfo(this._handle()));
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    raw.sessionFree(this._h);
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }
}

module.exports = { PythonSession, ShellSession, CellStream, cellResult };
