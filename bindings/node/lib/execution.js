'use strict';
// A running process: stdout/stderr as async iterators, stdin, wait, kill.
//
// Output is pulled, never pushed: when somebody waits for output or for the
// exit, the execution reads what the library has buffered (read with
// timeout 0) and, if that is not enough, asks the addon to watch the
// execution's fd (one poller thread for all executions, no libuv pool thread
// held). What was read is queued here up to HIGH_WATER bytes per stream;
// beyond that reading pauses and the process blocks, as on a pipe.
const os = require('node:os');
const { StringDecoder } = require('node:string_decoder');
const native = require('./native');
const { BoxliteError } = require('./errors');

const HIGH_WATER = 1 << 20; // bytes queued per stream before reading pauses
const CHUNK = 64 << 10; // one read; the protocol's largest data frame

function closedError(what) {
  return new BoxliteError(`${what}: the execution was closed`, { code: 'closed' });
}

class StreamState {
  constructor() {
    this.chunks = [];
    this.bytes = 0;
    this.eof = false;
    this.error = null; // set when the execution is closed under a reader
    this.waiters = [];
    this.decoder = new StringDecoder('utf8');
    this.text = ''; // decoded, not yet handed out (line reads)
  }
}

/** Output of one stream. Callable too: `await execution.stdout()` resolves to the stream (BoxLite's API). */
class OutputStream extends Function {
  /** The next line, with its newline (the last may lack it); null at the end. */
  async next() {
    const st = this._state;
    for (;;) {
      const nl = st.text.indexOf('\n');
      if (nl >= 0) {
        const line = st.text.slice(0, nl + 1);
        st.text = st.text.slice(nl + 1);
        return line;
      }
      const b = await this._ex._take(this._fd);
      if (b === null) {
        const rest = st.text + st.decoder.end();
        st.text = '';
        return rest === '' ? null : rest;
      }
      st.text += st.decoder.write(b);
    }
  }

  /** Chunks as strings (UTF-8, never split inside a character), as they arrive. */
  async *[Symbol.asyncIterator]() {
    const st = this._state;
    if (st.text) {
      const t = st.text;
      st.text = '';
      yield t;
    }
    for (;;) {
      const b = await this._ex._take(this._fd);
      if (b === null) {
        const tail = st.decoder.end();
        if (tail) yield tail;
        return;
      }
      const t = st.decoder.write(b);
      if (t) yield t;
    }
  }

  /** Chunks as Buffers, as they arrive (do not mix with the string readers). */
  async *buffers() {
    for (;;) {
      const b = await this._ex._take(this._fd);
      if (b === null) return;
      yield b;
    }
  }

  /** Everything until the end, as a string. */
  async text() {
    let s = '';
    for await (const t of this) s += t;
    return s;
  }

  /** Everything until the end, as one Buffer. */
  async readAll() {
    const parts = [];
    for await (const b of this.buffers()) parts.push(b);
    return Buffer.concat(parts);
  }
}

function makeOutputStream(ex, fd) {
  const stream = function boxliteOutputStream() {
    return Promise.resolve(stream);
  };
  Object.setPrototypeOf(stream, OutputStream.prototype);
  Object.defineProperties(stream, {
    _ex: { value: ex },
    _fd: { value: fd },
    _state: { value: ex._streams[fd] },
  });
  return stream;
}

/** Stdin of a process started with `stdin: true`. Callable: `await execution.stdin()` resolves to it. */
class StdinWriter extends Function {
  /** Writes a Buffer, Uint8Array or string (UTF-8); resolves when the box took it. Writes keep their order. */
  write(data) {
    if (typeof data === 'string') data = Buffer.from(data, 'utf8');
    else if (!(data instanceof Uint8Array)) {
      return Promise.reject(new TypeError(`data must be a Buffer, Uint8Array or string, got ${typeof data}`));
    }
    return this._ex._stdinOp((h) => native.executionWrite(h, data));
  }

  /** BoxLite's name for write(string). */
  writeString(text) {
    if (typeof text !== 'string') return Promise.reject(new TypeError(`text must be a string, got ${typeof text}`));
    return this.write(text);
  }

  /** Closes stdin (EOF for the process), after the writes before it. */
  close() {
    return this._ex._stdinOp((h) => native.executionCloseStdin(h));
  }

  end() {
    return this.close();
  }
}

function makeStdin(ex) {
  const w = function boxliteStdin() {
    return Promise.resolve(w);
  };
  Object.setPrototypeOf(w, StdinWriter.prototype);
  Object.defineProperty(w, '_ex', { value: ex });
  return w;
}

function signalNumber(sig) {
  if (typeof sig === 'number') return sig;
  if (typeof sig === 'string' && Object.hasOwn(os.constants.signals, sig)) return os.constants.signals[sig];
  throw new TypeError(`signal must be a signal number or name like "SIGTERM", got ${typeof sig === 'string' ? JSON.stringify(sig) : typeof sig}`);
}

class Execution {
  /** @internal Made by Box.exec. */
  constructor(handle, argv, hasStdin) {
    this._h = handle;
    this._id = native.executionId(handle);
    this.argv = argv;
    this._hasStdin = hasStdin;
    this._streams = [null, new StreamState(), new StreamState()];
    this._exit = undefined; // {exitCode, signal, timedOut, errorMessage?} once known
    this._exitError = null;
    this._exitWaiters = [];
    this._freed = false;
    this._closed = false;
    this._watching = false;
    this._pumping = false;
    this._blockingWait = false;
    this._stdinChain = Promise.resolve();
    this.stdout = makeOutputStream(this, native.STDOUT);
    this.stderr = makeOutputStream(this, native.STDERR);
    this.stdin = makeStdin(this);
  }

  /** The execution's id (12 hex digits; BoxLite's `await execution.id()`). */
  async id() {
    return this._id;
  }

  /**
   * Waits for the exit: {exitCode, signal, timedOut, errorMessage?}; exitCode
   * is -N when signal N ended it (as in BoxLite); errorMessage (BoxLite's
   * JsExecResult) says why it ended abnormally: set when its timeout killed it.
   */
  wait() {
    if (this._exit !== undefined) {
      return this._exitError ? Promise.reject(this._exitError) : Promise.resolve(this._exit);
    }
    if (this._closed) return Promise.reject(closedError('wait'));
    return new Promise((resolve, reject) => {
      this._exitWaiters.push({ resolve, reject });
      this._pump();
    });
  }

  /** Sends SIGKILL. */
  async kill() {
    this._live('kill');
    native.executionKill(this._h);
  }

  /** Sends a signal (number or name like "SIGTERM"). */
  async signal(sig) {
    const n = signalNumber(sig);
    this._live('signal');
    native.executionSignal(this._h, n);
  }

  /** Resizes the terminal of a `tty: true` execution (BoxLite's name); the process gets SIGWINCH. */
  async resizeTty(rows, cols) {
    this._live('resizeTty');
    native.executionResize(this._h, rows, cols);
  }

  /** Same as resizeTty. */
  async resize(rows, cols) {
    return this.resizeTty(rows, cols);
  }

  /** Closes stdin (same as `stdin.close()`). */
  closeStdin() {
    return this.stdin.close();
  }

  /** Abandons the execution: a process still running is killed; readers and waiters get a "closed" error. */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._release();
    const err = closedError('read');
    for (const fd of [1, 2]) {
      const st = this._streams[fd];
      if (!st.eof) {
        st.eof = true;
        st.error = err;
      }
      this._wake(st);
    }
    if (this._exit === undefined) {
      for (const w of this._exitWaiters.splice(0)) w.reject(closedError('wait'));
    }
  }

  [Symbol.dispose]() {
    this.close();
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }

  // ---- internals ----

  _live(op) {
    if (this._closed) throw closedError(op);
    if (this._freed) {
      throw new BoxliteError(`${op}: exec ${JSON.stringify(this.argv)} has exited`, { code: 'invalid_state' });
    }
  }

  _stdinOp(fn) {
    const run = () => {
      if (!this._hasStdin) {
        throw new BoxliteError('stdin was not requested: exec with { stdin: true }', { code: 'invalid_state' });
      }
      if (this._closed) throw closedError('stdin');
      if (this._freed) throw new BoxliteError('stdin: process has exited', { code: 'closed' });
      return fn(this._h);
    };
    const p = this._stdinChain.then(run);
    this._stdinChain = p.then(
      () => undefined,
      () => undefined,
    );
    return p;
  }

  /** The next queued Buffer of fd, or null at its end. */
  async _take(fd) {
    const st = this._streams[fd];
    for (;;) {
      if (st.chunks.length) {
        const b = st.chunks.shift();
        st.bytes -= b.length;
        if (!st.eof && st.bytes < HIGH_WATER && !this._freed) this._pump();
        return b;
      }
      if (st.eof) {
        if (st.error) throw st.error;
        return null;
      }
      await new Promise((resolve) => {
        st.waiters.push(resolve);
        this._pump();
      });
    }
  }

  _wake(st) {
    for (const w of st.waiters.splice(0)) w();
  }

  _settleExit(exit, error) {
    if (this._exit !== undefined) return;
    // BoxLite's JsExecResult.errorMessage: why the process ended abnormally (here: its timeout), else absent.
    if (exit && exit.timedOut) exit.errorMessage = `exec ${JSON.stringify(this.argv)}: timed out`;
    this._exit = exit;
    this._exitError = error;
    for (const w of this._exitWaiters.splice(0)) {
      if (error) w.reject(error);
      else w.resolve(exit);
    }
  }

  /** Reads what is there, settles who can be settled, and waits for more if somebody still waits. */
  _pump() {
    if (this._pumping || this._freed) return;
    this._pumping = true;
    try {
      let drains = 0;
      let got = false;
      for (const fd of [1, 2]) {
        const st = this._streams[fd];
        while (!st.eof && st.bytes < HIGH_WATER) {
          const r = native.executionRead(this._h, fd, CHUNK, 0);
          if (typeof r !== 'number') {
            st.chunks.push(r);
            st.bytes += r.length;
            got = true;
            continue;
          }
          if (r === native.EOF) st.eof = true;
          else drains++;
          break;
        }
      }
      if (this._exit === undefined) {
        try {
          const x = native.executionWait(this._h, 0);
          if (x !== native.AGAIN) this._settleExit(x, null);
        } catch (e) {
          this._settleExit(null, e);
        }
      }
      for (const fd of [1, 2]) {
        const st = this._streams[fd];
        if (st.waiters.length && (st.chunks.length || st.eof)) this._wake(st);
      }
      const [, out, err] = this._streams;
      if (this._exit !== undefined && out.eof && err.eof) {
        this._release(); // all output is here: the handle is not needed any more
        return;
      }
      const waiting = out.waiters.length > 0 || err.waiters.length > 0 || this._exitWaiters.length > 0;
      if (waiting && drains > 0) {
        this._watch();
      } else if (this._exitWaiters.length) {
        this._waitBlocking(); // both queues full and nobody reads them: wait for the exit on a pool thread
      }
    } catch (e) {
      // the handle went bad under us (freed elsewhere): end everything with that error
      this._fail(e);
    } finally {
      this._pumping = false;
    }
  }

  _watch() {
    if (!this._watching) {
      this._watching = true;
      native.executionWatchFd(this._h).then(
        () => {
          this._watching = false;
          this._pump();
        },
        () => {
          this._watching = false; // freed meanwhile: close() settled everyone
        },
      );
    }
  }

  _waitBlocking() {
    if (this._blockingWait) return;
    this._blockingWait = true;
    native.executionWait(this._h, -1).then(
      (x) => {
        this._settleExit(x, null);
        this._pump();
      },
      (e) => this._settleExit(null, e),
    );
  }

  _fail(e) {
    for (const fd of [1, 2]) {
      const st = this._streams[fd];
      if (!st.eof) {
        st.eof = true;
        st.error = e;
      }
      this._wake(st);
    }
    this._settleExit(null, e);
    this._release();
  }

  _release() {
    if (this._freed) return;
    this._freed = true;
    native.executionFree(this._h);
  }
}

/**
 * Reads an output stream to its end keeping its first `limit` bytes, decoded
 * as UTF-8: {text, truncated}. The rest is read too (the process is never
 * blocked) and dropped.
 */
async function collectCapped(stream, limit) {
  const dec = new StringDecoder('utf8');
  let text = '';
  let kept = 0;
  let dropped = 0;
  for await (const b of stream.buffers()) {
    const room = limit - kept;
    if (room >= b.length) {
      text += dec.write(b);
      kept += b.length;
    } else {
      if (room > 0) {
        text += dec.write(b.subarray(0, room));
        kept += room;
      }
      dropped += b.length - Math.max(room, 0);
    }
  }
  return { text: text + dec.end(), truncated: dropped > 0 };
}

/** The C ABI's command JSON from Box.exec's options. */
function commandJson({ argv, env, cwd, user, timeoutSecs, stdin, tty, rows, cols, outputLimitBytes }) {
  const c = { argv };
  if (env && Object.keys(env).length) c.env = env;
  if (cwd !== undefined) c.cwd = cwd;
  if (user !== undefined) c.user = user;
  if (timeoutSecs !== undefined && timeoutSecs !== null) c.timeout_secs = timeoutSecs;
  if (stdin) c.stdin = true;
  if (tty) c.tty = true;
  if (rows !== undefined) c.rows = rows;
  if (cols !== undefined) c.cols = cols;
  if (outputLimitBytes !== undefined) c.output_limit_bytes = outputLimitBytes; // absent: the runtime's
  return JSON.stringify(c);
}

module.exports = { Execution, OutputStream, StdinWriter, commandJson, collectCapped, HIGH_WATER };
