'use strict';
// A box handle (BoxLite's JsBox): info, exec, start/stop/remove, snapshot, cloneBox, export.
const native = require('./native');
const { BoxliteError } = require('./errors');
const { Execution, commandJson } = require('./execution');
const { execOptions, checkArgs, checkSeconds, checkString, normalizeEnv, boxInfo, camelize, isPlainObject } = require('./options');
const { SnapshotHandle, cloneOptionsJson, checkEmptyOptions } = require('./snapshot');
const { NetworkHandle } = require('./network');

const COPY_KEYS = { recursive: 'bool', overwrite: 'bool', followSymlinks: 'bool', includeParent: 'bool', maxBytes: 'cap', maxEntries: 'cap', timeoutSecs: 'secs', layout: 'layout' };

/**
 * BoxLite's CopyOptions as the C ABI's JSON; validated here, once. layout
 * (ours): 'boxlite' (default: a directory lands inside the destination under
 * its own name, the destination made if missing, as BoxLite 0.10) or
 * 'docker' (a missing destination becomes the copy, as docker cp).
 */
function copyOptionsJson(options) {
  if (options === undefined || options === null) options = {};
  if (!isPlainObject(options)) throw new TypeError('copy options must be an object');
  const o = { layout: 'boxlite' };
  for (const [k, v] of Object.entries(options)) {
    const kind = COPY_KEYS[k];
    if (!kind) throw new TypeError(`unknown copy option ${JSON.stringify(k)}`);
    if (v === undefined) continue;
    const key = k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
    if (kind === 'layout') {
      if (v !== 'boxlite' && v !== 'docker') throw new TypeError(`copy option layout must be 'boxlite' or 'docker', got ${JSON.stringify(v)}`);
      o.layout = v;
    } else if (kind === 'bool') {
      if (typeof v !== 'boolean') throw new TypeError(`copy option ${k} must be a boolean`);
      o[key] = v;
    } else if (kind === 'cap') {
      if (v === null) o[key] = -1;
      else if (Number.isSafeInteger(v) && v > 0) o[key] = v;
      else throw new BoxliteError(`copy option ${k} must be a positive integer or null (no cap)`, { code: 'invalid_argument' });
    } else {
      o.timeout_secs = checkSeconds(v, `copy option ${k}`); // the library refuses <= 0
    }
  }
  return JSON.stringify(o);
}

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
   *   exec({ cmd, args, env, cwd, user, timeoutSecs, stdin, tty, rows, cols })
   *
   * tty: true runs it on a terminal in the box (rows x cols, default 24x80):
   * stdout carries all it shows, echo included; stdin types into it;
   * resizeTty() resizes it.
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
    if (o.outputLimitBytes !== undefined) {
      throw new TypeError('exec: outputLimitBytes caps collected output (run(), SimpleBox.exec); an Execution streams it all');
    }
    // boxExec does not block, but would boot a configured or stopped box on
    // the event loop: start it on a worker first. A faulted box is left to
    // boxExec, which says why it stopped.
    const st = JSON.parse(native.boxInfo(this._handle('exec')));
    if (st.state === 'configured' || st.state === 'paused' || (st.state === 'stopped' && !st.faulted)) await this.start();
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
    return native.boxRun(this._handle('run'), commandJson({ argv, ...o, stdin: false }));
  }

  /**
   * Copies a host file or directory into the box, as BoxLite 0.10 does (see
   * boxlite_box_copy_in): a directory lands inside boxDest under its own name,
   * boxDest made if missing (copyIn('/src/data', '/app') gives /app/data/...);
   * a file inside boxDest if that is a directory, else at that path; a source
   * ending in "/." copies a directory's contents into boxDest.
   * options: BoxLite's CopyOptions {recursive, overwrite, followSymlinks,
   * includeParent} plus maxBytes, maxEntries (null: no cap), timeoutSecs and
   * layout ('docker': a missing destination becomes the copy, as docker cp).
   */
  async copyIn(hostPath, boxDest, options) {
    checkString(hostPath, 'hostPath');
    checkString(boxDest, 'containerDest');
    await native.boxCopyIn(this._handle('copyIn'), hostPath, boxDest, copyOptionsJson(options));
  }

  /**
   * Copies a box file or directory to the host, in the same layout as copyIn
   * (copyOut('/app', out) gives out/app/...), treating
   * what the box sends as hostile (see boxlite_box_copy_out). Options as for
   * copyIn; by default at most 1 GiB of file data and 100,000 entries.
   */
  async copyOut(boxSrc, hostDest, options) {
    checkString(boxSrc, 'containerSrc');
    checkString(hostDest, 'hostDest');
    await native.boxCopyOut(this._handle('copyOut'), boxSrc, hostDest, copyOptionsJson(options));
  }

  /**
   * Boots a configured or stopped box (a running one: no-op). exec, copies
   * and sessions start a configured or stopped box themselves, except one
   * whose last run ended in a fault (a crashed VM): that one rejects with
   * code "invalid_state" naming the fault until started here.
   */
  async start() {
    await native.boxStart(this._handle('start'));
  }

  /**
   * The running box's metrics (BoxMetrics, BoxLite's names): exec and byte
   * counters from the box's shim (every process's execs since the box
   * started), CPU and memory of its VMM, boot timings. Rejects with code
   * "invalid_state" when the box is not running.
   */
  async metrics() {
    return camelize(JSON.parse(await native.boxMetrics(this._handle('metrics'))));
  }

  /** Stops the box (and removes it when it was created with autoRemove). */
  async stop() {
    await native.boxStop(this._handle('stop'));
  }

  /**
   * Saves the running box with its memory into its directory and ends its
   * processes: a paused box (status "paused") holds no process and no host
   * memory, and a detached one outlives this process. Resolves to
   * {savedAt, stateBytes, saveMs}. A paused box: no-op. Its streams end (a
   * detachable exec runs on). A box with volumes rejects with code
   * "unsupported"; no disk room for its memory, "limit_exceeded".
   */
  async pause() {
    return camelize(JSON.parse((await native.boxPause(this._handle('pause'))) || '{}'));
  }

  /**
   * Restores a paused box as the same machine (a running one: no-op). exec,
   * copies and sessions resume a paused box themselves. A state saved by
   * another QEMU, kernel or agent rejects with code "unsupported" and leaves
   * the box stopped with its disk (start() then boots it).
   */
  async resume() {
    await native.boxResume(this._handle('resume'));
  }

  /** Deletes the box and its disk; a running box needs force. */
  async remove(force = false) {
    if (isPlainObject(force)) force = !!force.force;
    if (typeof force !== 'boolean') throw new TypeError(`force must be a boolean, got ${typeof force}`);
    await native.boxRemove(this._handle('remove'), force);
  }

  /** Tunnels to ports in the box: `await (await box.network.tunnel(8000)).connect()`. */
  get network() {
    return new NetworkHandle(async () => this);
  }

  /** Prepares a one-shot tunnel to a TCP port inside the box (box.network.tunnel). */
  async tunnel(port) {
    return this.network.tunnel(port);
  }

  /** Snapshots of the box's disk: `await box.snapshot.create('name')`, list, get, remove, restore. */
  get snapshot() {
    return new SnapshotHandle(this);
  }

  /**
   * A new, stopped box with this box's config, image and a copy of its disk
   * (or of the snapshot options.snapshot). The box must not be running.
   */
  async cloneBox(options, name) {
    const json = cloneOptionsJson(options, name);
    return new Box(this._rt, await native.boxClone(this._handle('cloneBox'), json));
  }

  /**
   * count running boxes (1 to 64) made from this running box at one instant,
   * as E2B's fork: its memory, processes and disk; the box runs on. Each
   * fork is a machine of its own (clock, entropy, hostname, boot id,
   * network, host ports); names name the first forks. Resolves to the forks.
   */
  async fork(count = 1, names = []) {
    if (!Number.isInteger(count)) throw new TypeError(`count must be an integer, got ${typeof count}`);
    if (!Array.isArray(names)) throw new TypeError(`names must be an array of strings, got ${typeof names}`);
    names.forEach((n, i) => checkString(n, `names[${i}]`));
    const ids = JSON.parse(await native.boxFork(this._handle('fork'), JSON.stringify({ count, names })));
    return Promise.all(ids.map(async (id) => {
      const b = await this._rt.get(id);
      if (!b) throw new BoxliteError(`fork ${id} is gone`, { code: 'not_found' });
      return b;
    }));
  }

  /**
   * Writes the box (not running) to one archive: its config, its disk
   * (sparse) and its image. dest is a file, or a directory in which the
   * archive is `<name or id>.boxlite`. Resolves to the archive's path.
   */
  async export(dest, options) {
    checkString(dest, 'dest');
    checkEmptyOptions(options, 'export options');
    return native.boxExport(this._handle('export'), dest);
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
