'use strict';
// box.snapshot (create, list, get, restore, remove) on a real box: a file
// written before a snapshot is back after a restore (three boots of one box).
// cloneBox, export and importBox (into a fresh home) without booting the copies.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite } = require('..');
const { home, ensureImage, missingImage, rejection } = require('./helpers');

test('snapshots, clone, export, import', { skip: missingImage('alpine:latest'), timeout: 300_000 }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-node-snap-'));
  const other = new JsBoxlite({ homeDir: path.join(tmp, 'home2') });
  const box = await runtime.create({ image: 'alpine:latest', memoryMib: 256, autoRemove: false }); // stopped and started again
  const made = [];
  t.after(async () => {
    for (const b of [box, ...made]) await b.remove(true).catch(() => {});
    await runtime.close();
    await other.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  await box.run(['sh', '-c', 'echo one > /root/f.txt; sync']);
  const live = await box.snapshot.create('live'); // a running box, at one instant
  assert.ok(!live.memory && live.containerDiskBytes > 0 && (await box.info()).status === 'running', JSON.stringify(live));
  await box.snapshot.remove('live');
  await box.stop();

  const info = await box.snapshot.create('one');
  assert.equal(info.name, 'one');
  assert.equal(info.boxId, box.id);
  assert.ok(info.containerDiskBytes > 0 && info.sizeBytes > 0 && info.sizeBytes < info.containerDiskBytes, JSON.stringify(info));
  assert.equal((await rejection(box.snapshot.create('one'))).code, 'already_exists');
  assert.equal((await rejection(box.snapshot.create('a/b'))).code, 'invalid_argument');
  assert.deepEqual((await box.snapshot.list()).map((s) => s.name), ['one']);
  assert.deepEqual(await box.snapshot.get('one'), info);
  assert.equal(await box.snapshot.get('nope'), null);

  await box.start();
  await box.run(['sh', '-c', 'echo two > /root/f.txt']);
  await box.stop();
  await box.snapshot.restore('one');
  await box.start();
  assert.equal((await box.run(['cat', '/root/f.txt'])).stdout.toString(), 'one\n');
  await box.stop();

  const clone = await box.cloneBox({ snapshot: 'one' }, `clone-${box.id}`);
  made.push(clone);
  assert.notEqual(clone.id, box.id);
  assert.equal(clone.name, `clone-${box.id}`);
  assert.equal((await clone.info()).status, 'stopped');

  const archive = await box.export(tmp);
  assert.equal(archive, path.join(tmp, `${box.id}.boxlite`));
  // The importer's options decide what the archive's content does not.
  const imported = await other.importBox(archive, 'moved', { memoryMib: 256, autoRemove: false });
  made.push(imported);
  assert.equal(imported.name, 'moved');
  const ii = await imported.info();
  assert.ok(ii.memoryMib === 256 && ii.autoRemove === false, JSON.stringify(ii));
  assert.equal((await rejection(other.importBox(archive, 'bad', { image: 'alpine:latest' }))).code, 'invalid_argument');
  assert.equal((await rejection(other.importBox(path.join(tmp, 'missing.boxlite')))).code, 'not_found');

  await box.snapshot.remove('one');
  assert.deepEqual(await box.snapshot.list(), []);
});
