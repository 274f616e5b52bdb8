'use strict';
// A session's cell (CellStream), and what every session call shares: the
// cell result, the truncation line, errors with their partial results.
//
// A cell is read like an execution's output: cellRead with timeout 0, and
// cellWatchFd (the addon's poller thread) to wait, so a running cell holds
// no libuv pool thread; its result is taken once its output has ended.
const { StringDecoder } = require('node:string_decoder');
const raw = require('./raw');
const { BoxliteError, TimeoutError, fromNative } = require('./errors');
const { checkString, execOptions } = require('./options');

const CHUNK = 64 << 10;

/**
 * The library's cell result JSON as {stdout, stderr, value, error, exitCode,
 * timedOut, restarted, stdoutTruncated, stderrTruncated}.
 */
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
    stdoutTruncated: !!j.stdout_truncated,
    stderrTruncated: !!j.stderr_truncated,
  };
}

/** The line CodeBox.run appends when output was dropped ('' when none was); as Python's. */
function truncationMarker(stdout, stderr, limit) {
  const streams = [stdout && 'stdout', stderr && 'stderr'].filter(Boolean).join(' and ');
  if (!streams) return '';
  return `\n[output truncated: ${streams} was longer than ${limit ? `${limit} bytes` : 'the output limit'}; the rest was dropped]\n`;
}

/** Keeps the first `limit` bytes of a stream's buffers: {buf, truncated}. */
class Capped {
  constructor(limit) {
    this.limit = limit;
    this.parts = [];
    this.kept = 0;
    this.truncated = false;
  }

  push(b) {
    const room = this.limit - this.kept;
    if (b.length > room) {
      this.truncated = true;
      if (room <= 0) return;
      b = b.subarray(0, room);
    }
    this.parts.push(b);
    this.kept += b.length;
  }

  text() {
    return Buffer.concat(this.parts, this.kept).toString('utf8');
  }
}

/**
 * A raw-layer error of a session call as the SDK's; a timeout keeps the
 * partial result: a cell's (resultJson) or a shell command's (result).
 */
function convert(e) {
  const err = fromNative(e);
  if (!(err instanceof TimeoutError) || !e) return err;
  if (typeof e.resultJson === 'string') {
    const r = cellResult(e.resultJson);
    err.result = r;
    err.stdout = r.stdout;
    err.stderr = r.stderr;
    err.restarted = r.restarted;
  } else if (e.result) {
    err.stdout = e.result.stdout.toString('utf8');
    err.stderr = e.result.stderr.toString('utf8');
    err.exitCode = e.result.exitCode;
    err.stdoutTruncated = !!e.result.stdoutTruncated;
    err.stderrTruncated = !!e.result.stderrTruncated;
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

/** A cell's options for the C ABI (null: none); the library converts and bounds the timeout. */
function cellOptions(o) {
  return o.timeoutSecs ? JSON.stringify({ timeout_secs: o.timeoutSecs }) : null;
}

function closed(what) {
  return new BoxliteError(`${what} is closed`, { code: 'closed' });
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
    this._options = cellOptions(o);
    this._h = null;
    this._starting = null;
    this._eof = false;
    this._closed = false;
    this._result = undefined;
    this._decoders = { 1: new StringDecoder('utf8'), 2: new StringDecoder('utf8') };
    this._limitOption = o.outputLimitBytes;
    this._rest = null; // output read by result(), not handed out: {1: Capped, 2: Capped}
  }

  async _handle() {
    if (this._closed) throw closed('cell');
    if (!this._h) {
      if (!this._starting) {
        this._starting = (async () => {
          const s = await this._getSession();
          return call(raw.sessionRunStart, s._handle(), this._code, this._options);
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
   * timedOut, restarted, stdoutTruncated, stderrTruncated}. At most
   * outputLimitBytes per stream (the option, else the runtime's, 64 MiB) is
   * collected; the rest is read and dropped. A timeout rejects with
   * TimeoutError (`result`: the same, so far).
   */
  async result() {
    if (this._result !== undefined) return this._result;
    const h = await this._handle();
    if (!this._rest) {
      const s = await this._getSession();
      const limit = this._limitOption ?? s._box._rt.outputLimitBytes;
      this._rest = { 1: new Capped(limit), 2: new Capped(limit) };
    }
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
    // what the library still held (normally nothing: all was read above) goes after what was read
    const out = this._rest[1];
    const err = this._rest[2];
    if (r.stdout) out.push(Buffer.from(r.stdout, 'utf8'));
    if (r.stderr) err.push(Buffer.from(r.stderr, 'utf8'));
    r.stdout = out.text();
    r.stderr = err.text();
    r.stdoutTruncated = r.stdoutTruncated || out.truncated;
    r.stderrTruncated = r.stderrTruncated || err.truncated;
    Object.defineProperty(r, 'outputLimitBytes', { value: out.limit, enumerable: false });
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

module.exports = { CellStream, cellResult, truncationMarker, convert, call, closed };
