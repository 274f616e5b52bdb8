'use strict';
// box.snapshot (BoxLite's JsSnapshotHandle), and the options of cloneBox and
// export. Every operation needs the box not running (stopped, or never
// started): a running box rejects with code 'invalid_state'. Disk copies are
// copy-on-write where the host file system allows, else sparse.
const native = require('./native');
const { errorCode } = require('./errors');
const { checkString, isPlainObject } = require('./options');

/** The C ABI's snapshot JSON as BoxLite's JsSnapshotInfo. */
function snapshotInfo(d) {
  return {
    id: d.id,
    boxId: d.box_id,
    name: d.name,
    createdAt: d.created_at,
    containerDiskBytes: d.container_disk_bytes,
    sizeBytes: d.size_bytes,
    memory: !!d.memory,
    memoryBytes: d.memory_bytes ?? 0,
  };
}

function checkEmptyOptions(options, what) {
  if (options === undefined || options === null) return;
  if (!isPlainObject(options)) throw new TypeError(`${what} must be an object`);
  for (const k of Object.keys(options)) throw new TypeError(`unknown ${what} key ${JSON.stringify(k)}`);
}

/** cloneBox's options ({snapshot?: name}) and name, as the C ABI's JSON. */
function cloneOptionsJson(options, name) {
  const o = {};
  if (options !== undefined && options !== null) {
    if (!isPlainObject(options)) throw new TypeError('clone options must be an object');
    for (const [k, v] of Object.entries(options)) {
      if (k !== 'snapshot') throw new TypeError(`unknown clone option ${JSON.stringify(k)}`);
      if (v !== undefined && v !== null) o.snapshot = checkString(v, 'options.snapshot');
    }
  }
  if (name !== undefined && name !== null) o.name = checkString(name, 'name');
  return JSON.stringify(o);
}

class SnapshotHandle {
  /** @internal Made by Box.snapshot. */
  constructor(box) {
    this._box = box;
  }

  /**
   * Saves the box's disk as snapshot `name` (null: named by its id). A
   * running box is saved at one instant (it stops only for the save; sync
   * runs in the box first, where the image has it). options: { memory: true } keeps its memory too (a
   * running or paused box): restore() then brings it back paused at that
   * instant, its processes and sessions as they were.
   */
  async create(name, options) {
    if (name !== undefined && name !== null) checkString(name, 'name');
    const o = {};
    if (options !== undefined && options !== null) {
      if (!isPlainObject(options)) throw new TypeError('snapshot options must be an object');
      for (const [k, v] of Object.entries(options)) {
        if (k !== 'memory') throw new TypeError(`unknown snapshot options key ${JSON.stringify(k)} (memory)`);
        if (v !== undefined && v !== null && typeof v !== 'boolean') throw new TypeError('snapshot options.memory must be a boolean');
        if (v) o.memory = true;
      }
    }
    return snapshotInfo(JSON.parse(await native.boxSnapshotCreateWith(this._box._handle('snapshot.create'), name ?? null, JSON.stringify(o))));
  }

  /** The box's snapshots, newest first. */
  async list() {
    return JSON.parse(await native.boxSnapshotList(this._box._handle('snapshot.list'))).map(snapshotInfo);
  }

  /** The snapshot named `name`, or null. */
  async get(name) {
    checkString(name, 'name');
    try {
      return snapshotInfo(JSON.parse(await native.boxSnapshotGet(this._box._handle('snapshot.get'), name)));
    } catch (e) {
      if (errorCode(e) === 'not_found') return null;
      throw e;
    }
  }

  /** Deletes the snapshot (code 'not_found' if there is none). */
  async remove(name) {
    checkString(name, 'name');
    await native.boxSnapshotRemove(this._box._handle('snapshot.remove'), name);
  }

  /** Replaces the box's disk with the snapshot's; the box must not be running. A snapshot with memory leaves the box paused at its instant. */
  async restore(name) {
    checkString(name, 'name');
    await native.boxSnapshotRestore(this._box._handle('snapshot.restore'), name);
  }
}

module.exports = { SnapshotHandle, snapshotInfo, cloneOptionsJson, checkEmptyOptions };
