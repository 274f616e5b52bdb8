'use strict';
// The runtime (BoxLite's JsBoxlite / Boxlite): a home directory with its
// images and boxes. Opened lazily on first use, so the constructor never
// blocks or fails on I/O.
const native = require('./native');
const { BoxliteError, errorCode, unsupported } = require('./errors');
const { Box } = require('./box');
const { BoxliteRestOptions } = require('./rest');
const { boxOptions, boxInfo, camelize, checkSeconds, checkString, checkInt, checkKeys, checkOutputLimit, isPlainObject, typeOf, DEFAULT_OUTPUT_LIMIT } = require('./options');

let defaultRuntime = null;
let defaultOptions = {};

/**
 * imageRegistries: BoxLite's [{host, transport, skipVerify, search, auth: {username, password,
 * bearerToken}}] (and mirrors, ours), or a host string (a search registry, as BoxLite's early
 * examples) → the C ABI's image_registries. Credentials go to the library only.
 */
function imageRegistries(v, where) {
  if (!Array.isArray(v)) throw new TypeError(`${where} must be an array of {host, transport, skipVerify, search, auth}, got ${typeOf(v)}`);
  return v.map((r, i) => {
    const w = `${where}[${i}]`;
    if (typeof r === 'string') return { host: checkString(r, w), search: true };
    if (!isPlainObject(r)) throw new TypeError(`${w} must be a host or {host, transport, skipVerify, search, auth}, got ${typeOf(r)}`);
    checkKeys(r, ['host', 'transport', 'skipVerify', 'search', 'auth', 'mirrors'], w);
    const o = { host: checkString(r.host, `${w}.host`) };
    if (r.transport !== undefined && r.transport !== null) o.transport = checkString(r.transport, `${w}.transport`);
    for (const [k, wire] of [['skipVerify', 'skip_verify'], ['search', 'search']]) {
      if (r[k] === undefined || r[k] === null) continue;
      if (typeof r[k] !== 'boolean') throw new TypeError(`${w}.${k} must be a boolean, got ${typeOf(r[k])}`);
      o[wire] = r[k];
    }
    if (r.auth !== undefined && r.auth !== null) {
      if (!isPlainObject(r.auth)) throw new TypeError(`${w}.auth must be {username, password} or {bearerToken}, got ${typeOf(r.auth)}`);
      checkKeys(r.auth, ['username', 'password', 'bearerToken'], `${w}.auth`);
      for (const [k, wire] of [['username', 'username'], ['password', 'password'], ['bearerToken', 'bearer_token']]) {
        if (r.auth[k] !== undefined && r.auth[k] !== null) o[wire] = checkString(r.auth[k], `${w}.auth.${k}`);
      }
    }
    if (r.mirrors !== undefined && r.mirrors !== null) {
      if (!Array.isArray(r.mirrors)) throw new TypeError(`${w}.mirrors must be an array of URLs, got ${typeOf(r.mirrors)}`);
      o.mirrors = r.mirrors.map((m, j) => checkString(m, `${w}.mirrors[${j}]`));
    }
    return o;
  });
}

function runtimeJson(o) {
  if (o === undefined || o === null) o = {};
  if (!isPlainObject(o)) throw new TypeError(`options must be an object, got ${typeOf(o)}`);
  const c = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === null) continue;
    if (k === 'homeDir' || k === 'home') c.home = checkString(v, `options.${k}`);
    else if (k === 'assets' || k === 'assetsDir') c.assets = checkString(v, `options.${k}`);
    else if (k === 'outputLimitBytes') c.output_limit_bytes = checkOutputLimit(v, `options.${k}`); // absent: the library's 64 MiB
    else if (k === 'runningMemoryCapMib') c.running_memory_cap_mib = checkInt(v, `options.${k}`); // the library range-checks it
    else if (k === 'warmPoolMemoryMib') c.warm_pool_memory_mib = checkInt(v, `options.${k}`); // the library range-checks it
    else if (k === 'warmPools') {
      if (!Array.isArray(v)) throw new TypeError(`options.warmPools must be an array of {size, box}, got ${typeOf(v)}`);
      c.warm_pools = v.map((p, i) => {
        if (!isPlainObject(p)) throw new TypeError(`options.warmPools[${i}] must be an object {size, box}, got ${typeOf(p)}`);
        checkKeys(p, ['size', 'box'], `options.warmPools[${i}]`);
        return { boxes: checkInt(p.size, `options.warmPools[${i}].size`), box: boxOptions(p.box, `options.warmPools[${i}].box`) };
      });
    }
    else if (k === 'imageRegistries') {
      const regs = imageRegistries(v, `options.${k}`);
      if (regs.length) c.image_registries = regs;
    } else throw new TypeError(`options.${k} is not a known option (homeDir, assets, outputLimitBytes, runningMemoryCapMib, warmPools, warmPoolMemoryMib, imageRegistries)`);
  }
  return JSON.stringify(c);
}

class JsBoxlite {
  /**
   * new JsBoxlite({ homeDir?, assets?, outputLimitBytes?, runningMemoryCapMib? }): homeDir
   * defaults to $BOXLITE_HOME, else ~/.boxlite. outputLimitBytes (default 64 MiB) caps the
   * output collected per stream of a command run to completion. runningMemoryCapMib (default
   * 0: none) caps the guest memory of the running boxes: past it the least recently used idle
   * ones are paused. warmPools ([{size, box}], box as create's options) keeps boxes of each
   * shape started and idle: a create of that shape is handed one at once (runtime start
   * "pool"); warmPoolMemoryMib bounds the guest memory of all pools' boxes.
   */
  constructor(options = {}) {
    // Not enumerable: it may hold registry credentials, kept out of console.log and JSON.stringify.
    Object.defineProperty(this, '_json', { value: runtimeJson(options), writable: true, enumerable: false });
    /** Bytes collected per stream of a command run to completion (SimpleBox.exec, Box.run, CodeBox.run, ...). */
    this.outputLimitBytes = JSON.parse(this._json).output_limit_bytes ?? DEFAULT_OUTPUT_LIMIT;
    this._opening = null;
    this._closed = false;
    this._closing = null;
    this.images = Object.freeze({
      /** Imports an OCI layout directory or a docker-archive tar; resolves to the loaded images. */
      load: (path) => this.loadImage(path),
      /** The images in the store (BoxLite's ImageInfo fields and ours). */
      list: () => this.listImages(),
      /** BoxLite's pull: fetches reference from its registry; resolves to {reference, configDigest, layerCount}. */
      pull: (reference) => this.pullImage(reference),
      /** Every build held under an image name: {name, tags, curated: false, versions: [{digest, sizeBytes, sourceRef, recordedAt}]}. */
      get: (name) => this.getImage(name),
      /** Stops holding an image name (every tag, or only the tag or digest given); code not_found when none. */
      remove: (name) => this.removeImage(name),
    });
  }

  /** The process-wide default runtime ($BOXLITE_HOME or ~/.boxlite, or what initDefault set). */
  static withDefaultConfig() {
    if (!defaultRuntime || defaultRuntime._closed) defaultRuntime = new JsBoxlite(defaultOptions);
    return defaultRuntime;
  }

  /**
   * A runtime whose boxes live on a server of BoxLite's REST API (boxlite
   * serve): JsBoxlite.rest(BoxliteRestOptions.fromEnv()). Opened, like
   * any runtime, on first use.
   */
  static rest(options) {
    if (!(options instanceof BoxliteRestOptions)) throw new TypeError('JsBoxlite.rest: options must be a BoxliteRestOptions');
    const json = options._json(); // checked now; the key is kept out of the object's fields
    const rt = new JsBoxlite({ outputLimitBytes: options.outputLimitBytes ?? undefined });
    Object.defineProperty(rt, '_open', { value: () => native.runtimeNewRest(json), enumerable: false });
    Object.defineProperty(rt, '_remote', { value: true, enumerable: false }); // sessions cannot be named
    return rt;
  }

  /** Sets the options of the default runtime; before it was first used. */
  static initDefault(options) {
    const json = runtimeJson(options);
    if (defaultRuntime && defaultRuntime._opening && !defaultRuntime._closed) {
      throw new BoxliteError('initDefault: the default runtime is already in use', { code: 'invalid_state' });
    }
    defaultOptions = options ?? {};
    defaultRuntime = new JsBoxlite(defaultOptions);
    defaultRuntime._json = json;
  }

  /** @internal The runtime handle, opened on first use. */
  async _handle(op) {
    if (this._closed) throw new BoxliteError(`${op}: the runtime is closed`, { code: 'closed' });
    if (!this._opening) {
      this._opening = this._open ? this._open() : native.runtimeNew(this._json);
      this._opening.catch(() => {
        this._opening = null; // a later call tries again
      });
    }
    return this._opening;
  }

  /**
   * Creates a box and resolves with it configured, not booted (as BoxLite's
   * create): `await box.start()` boots it, and so does its first exec, copy or
   * session. Options are checked, and a missing image pulled, here.
   */
  async create(options, name) {
    const c = boxOptions(options, 'options');
    if (name !== undefined && name !== null) c.name = checkString(name, 'name');
    if (!c.image) throw new TypeError('options.image is required');
    const rt = await this._handle('create');
    const h = await native.boxCreate(rt, JSON.stringify(c));
    return new Box(this, h);
  }

  /**
   * A new, stopped box from an archive Box.export wrote, its image loaded
   * into this home if missing; name null leaves it unnamed. The archive is
   * checked as untrusted: a bad one rejects and leaves no box. Only its
   * content is kept (image, env, entrypoint, cmd, user, working dir); the
   * rest comes from options (box options without image and name), else the
   * defaults.
   */
  async importBox(archivePath, name, options) {
    checkString(archivePath, 'archivePath');
    if (name !== undefined && name !== null) checkString(name, 'name');
    const o = options === undefined || options === null ? null : JSON.stringify(boxOptions(options, 'options'));
    const rt = await this._handle('importBox');
    return new Box(this, await native.runtimeImportBox(rt, archivePath, name ?? null, o));
  }

  /** A box by id, unique id prefix or name; null when there is none. */
  async get(idOrName) {
    checkString(idOrName, 'idOrName');
    const rt = await this._handle('get');
    try {
      return new Box(this, await native.boxGet(rt, idOrName));
    } catch (e) {
      if (errorCode(e) === 'not_found') return null;
      throw e;
    }
  }

  /** {created, box}: the box named `name` if it exists, else a new one. */
  async getOrCreate(options, name) {
    const n = name ?? options?.name;
    if (n !== undefined && n !== null) {
      const box = await this.get(n);
      if (box) return { created: false, box };
    }
    try {
      return { created: true, box: await this.create(options, name) };
    } catch (e) {
      if (errorCode(e) === 'already_exists' && n) {
        const box = await this.get(n); // created by someone else meanwhile
        if (box) return { created: false, box };
      }
      throw e;
    }
  }

  /** Info of one box, or null. */
  async getInfo(idOrName) {
    const box = await this.get(idOrName);
    if (!box) return null;
    try {
      return await box.info();
    } finally {
      box.close();
    }
  }

  /** Info of every box in the home, newest first. */
  async listInfo() {
    const rt = await this._handle('listInfo');
    return JSON.parse(await native.boxList(rt)).map(boxInfo);
  }

  /** Removes a box by id or name (a running one needs force). */
  async remove(idOrName, force = false) {
    if (typeof force !== 'boolean') throw new TypeError(`force must be a boolean, got ${typeOf(force)}`);
    const box = await this.get(idOrName);
    if (!box) throw new BoxliteError(`remove: no box ${JSON.stringify(idOrName)}`, { code: 'not_found' });
    try {
      await box.remove(force);
    } finally {
      box.close();
    }
  }

  /** This runtime's counters since it opened (RuntimeMetrics, BoxLite's names). */
  async metrics() {
    return camelize(JSON.parse(native.runtimeMetrics(await this._handle('metrics'))));
  }

  /** Imports an OCI layout directory or a docker-archive tar. */
  async loadImage(path) {
    checkString(path, 'path');
    const rt = await this._handle('loadImage');
    return JSON.parse(await native.imageLoad(rt, path)).map(lowerKeys);
  }

  /**
   * The images in the store: [{name, digest, sizeBytes, layers, config, cachedAt}] with BoxLite's ImageInfo
   * fields too: reference (= name), repository, tag, id (= digest, the manifest's).
   */
  async listImages() {
    const rt = await this._handle('listImages');
    return JSON.parse(native.imageList(rt)).map(imageInfo);
  }

  /** Pulls reference into the store: BoxLite's ImagePullResult {reference, configDigest (the manifest digest here), layerCount}. */
  async pullImage(reference) {
    checkString(reference, 'reference');
    const rt = await this._handle('pullImage');
    const d = JSON.parse(await native.imagePull(rt, reference));
    return { reference: d.name || reference, configDigest: d.digest, layerCount: (d.layers || []).length };
  }

  /** BoxLite's ImageDetail of an image name ("alpine" or "docker.io/library/alpine"); code not_found when none. */
  async getImage(name) {
    checkString(name, 'name');
    const [repo] = splitRef(canonicalRef(name));
    const mine = (await this.listImages()).filter((i) => i.repository === repo);
    if (!mine.length) throw new BoxliteError(`images.get ${JSON.stringify(name)}: no image named ${repo} in the store`, { code: 'not_found' });
    const versions = new Map();
    for (const i of mine) {
      if (!versions.has(i.digest)) versions.set(i.digest, { digest: i.digest, sizeBytes: i.sizeBytes, sourceRef: i.reference, recordedAt: i.cachedAt });
    }
    return { name: repo, tags: [...new Set(mine.map((i) => i.tag))].sort(), curated: false, versions: [...versions.values()] };
  }

  /** Drops an image name: every tag of it, or only the tag or digest given; boxes using it keep working. */
  async removeImage(name) {
    checkString(name, 'name');
    const ref = canonicalRef(name);
    const [repo] = splitRef(ref);
    const given = name.includes('@') || name.split('/').pop().includes(':');
    const names = given ? [ref] : (await this.listImages()).filter((i) => i.repository === repo).map((i) => i.reference);
    if (!names.length) throw new BoxliteError(`images.remove ${JSON.stringify(name)}: no image named ${repo} in the store`, { code: 'not_found' });
    const rt = await this._handle('removeImage');
    for (const n of names) await native.imageRemove(rt, n);
  }

  /** Stops the boxes this runtime started (not detached ones) and releases it. Later calls fail with code "closed". */
  close() {
    if (this._closing) return this._closing;
    this._closed = true;
    const opening = this._opening;
    this._closing = (async () => {
      if (!opening) return;
      let rt;
      try {
        rt = await opening;
      } catch {
        return;
      }
      await native.runtimeFree(rt);
    })();
    return this._closing;
  }

  /**
   * BoxLite's shutdown(timeout): close(), waiting at most timeout seconds
   * (null/undefined: until done). Past it this resolves, and boxes still
   * stopping finish stopping in the background (the library bounds each
   * stop: a graceful part, then the VM is killed).
   */
  async shutdown(timeout) {
    if (timeout !== undefined && timeout !== null) {
      checkSeconds(timeout, 'timeout');
      if (timeout < 0) throw new RangeError(`timeout must be >= 0 seconds, got ${timeout}`);
    }
    const closing = this.close();
    if (timeout === undefined || timeout === null) return closing;
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(resolve, timeout * 1000); });
    try {
      await Promise.race([closing, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

/** An image of the C ABI's JSON with BoxLite's ImageInfo fields. */
function imageInfo(d) {
  const o = lowerKeys(d); // the C ABI's keys as they were (size_bytes, layers, config, cached_at)
  const [repository, tag] = splitRef(o.name || '');
  return { ...o, size: d.size_bytes, sizeBytes: d.size_bytes, reference: o.name, repository, tag, id: o.digest, cachedAt: d.cached_at || '' };
}

/** ref as the store names it: docker.io/library/alpine:latest for alpine. */
function canonicalRef(ref) {
  let [name, digest] = ref.split('@', 2);
  const first = name.split('/')[0];
  if (!name.includes('/')) name = `docker.io/library/${name}`;
  else if (!(first.includes('.') || first.includes(':') || first === 'localhost')) name = `docker.io/${name}`;
  if (digest !== undefined) return `${name}@${digest}`;
  if (!name.split('/').pop().includes(':')) name += ':latest';
  return name;
}

/** [repository, tag or digest] of a canonical reference. */
function splitRef(ref) {
  const at = ref.indexOf('@');
  if (at >= 0) return [ref.slice(0, at), ref.slice(at + 1)];
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  return colon > slash ? [ref.slice(0, colon), ref.slice(colon + 1)] : [ref, ''];
}

function lowerKeys(o) {
  if (!isPlainObject(o)) return o;
  const r = {};
  for (const [k, v] of Object.entries(o)) r[k.charAt(0).toLowerCase() + k.slice(1)] = v;
  return r;
}

module.exports = { JsBoxlite, Boxlite: JsBoxlite };
