'use strict';
// A box handle (BoxLite's JsBox): info, exec, start/stop/remove.
const native = require('./native');
const { BoxliteError } = require('./errors');
const { Execution, commandJson, noTty } = require('./execution');
const { execOptions, checkArgs, checkString, normalizeEnv, boxInfo, isPlainObject } = require('./options');

class Box {
  /** @internal Made by the runtime. */
  constructor(runtime, handle) {
    this._rt = runtime;
    this._h = handle;
    this._closed = false;
    /** The box id (12 hex digits). */
    this.id = native.boxId(handle);
    const info = JSON.parse(native.boxInfo(handle));
    /** The box name, or null. */
    this.name = info.name || null;
  }

  _handle(op) {
    if (this._closed) throw new BoxliteError(`${op}: this box handle was closed`, { code: 'closed' });
    return this._h;
  }

  /** Metadata: {id, name, image, status, state: {status, running, pid}, createdAt, cpus, memoryMib, runtime: {accel, bootMs, ...}, ...}. */
  async info() {
    return boxInfo(JSON.parse(native.boxInfo(this._handle('info'))));
  }

  /**
   * Starts a process and returns its Execution (streams, stdin, wait, kill).
   *
   *   exec(cmd, args?, env?, tty?, user?, timeoutSecs?, cwd?)   BoxLite's positional form
   *   exec({ cmd, args, env, cwd, user, timeoutSecs, stdin, tty })
   *
   * env is {K: V} or [[K, V]]. stdin is open (write, then close it) unless
   * `stdin: false` is given in the object form.
   */
  async exec(cmd, args, env, tty, user, timeoutSecs, cwd) {
    let o;
    if (isPlainObject(cmd)) {
      const { cmd: c, argv, args: a, ...rest } = cmd;
      if (argv !== undefined) {
        checkArgs(argv, 'argv');
        if (!argv.length) throw new TypeError('argv must not be empty');
        o = { argv, ...execOptions(rest) };
      } else {
        o = { argv: [checkString(c, 'cmd'), ...checkArgs(a ?? [], 'args')], ...execOptions(rest) };
      }
      if (o.stdin === undefined) o.stdin = true;
    } else {
      checkString(cmd, 'cmd');
      o = execOptions({ env: normalizeEnv(env, 'env'), tty, user, timeoutSecs, cwd });
      o.argv = [cmd, ...checkArgs(args ?? [], 'args')];
      o.stdin = true;
    }
    if (o.tty) throw noTty();
    if (o.outputLimitBytes !== undefined) {
      throw new TypeError('exec: outputLimitBytes caps collected output (run(), SimpleBox.exec); an Execution streams it all');
    }
    const h = native.boxExec(this._handle('exec'), commandJson(o));
    return new Execution(h, o.argv, !!o.stdin);
  }

  /**
   * Runs to completion on the C ABI's boxlite_box_run: {exitCode, signal,
   * timedOut, stdout: Buffer, stderr: Buffer, stdoutTruncated, stderrTruncated}.
   * The library collects at most options.outputLimitBytes per stream (default:
   * the runtime's, 64 MiB), reading and dropping the rest.
   */
  async run(argv, options) {
    checkArgs(argv, 'argv');
    const o = execOptions(options);
    if (o.tty) throw noTty();
    return native.boxRun(this._handle('run'), commandJson({ argv, ...o, stdin: false }));
  }

  async start() {
    await native.boxStart(this._handle('start'));
  }

  /** Stops the box (and removes it when it was created with autoRemove). */
  async stop() {
    await native.boxStop(this._handle('stop'));
  }

  /** Deletes the box and its disk; a running box needs force. */
  async remove(force = false) {
    if (isPlainObject(force)) force = !!force.force;
    if (typeof force !== 'boolean') throw new TypeError(`force must be a boolean, got ${typeof force}`);
    await native.boxRemove(this._handle('remove'), force);
  }

  /** Releases this handle; the box itself keeps running. */
  close() {
    if (this._closed) return;
    this._closed = true;
    native.boxFree(this._h);
  }

  async [Symbol.asyncDispose]() {
    if (!this._closed) {
      await this.stop();
      this.close();
    }
  }
}

module.exports = { Box };
