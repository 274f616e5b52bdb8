'use strict';
// Host folders in a box: one box with a read-write and a read-only volume.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, SimpleBox } = require('..');
const { home, ensureImage, missingImage, rejection } = require('./helpers');

const skip = missingImage('alpine:latest');

test('volumes', { skip, timeout: 180_000 }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-node-vol-'));
  fs.mkdirSync(path.join(dir, 'rw'));
  fs.mkdirSync(path.join(dir, 'ro'));
  fs.writeFileSync(path.join(dir, 'ro', 'data.txt'), 'from host\n');
  const box = new SimpleBox({
    image: 'alpine:latest', memoryMib: 256, runtime,
    volumes: [{ hostPath: path.join(dir, 'rw'), guestPath: '/work' }, { hostPath: path.join(dir, 'ro'), guestPath: '/data', readOnly: true }],
  });
  t.after(async () => {
    await box.stop();
    await runtime.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  let r = await box.exec('sh', '-c', 'cat /data/data.txt && echo out > /work/out.txt');
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout, 'from host\n');
  assert.equal(fs.readFileSync(path.join(dir, 'rw', 'out.txt'), 'utf8'), 'out\n');
  const st = fs.statSync(path.join(dir, 'rw', 'out.txt'));
  assert.deepEqual([st.uid, st.gid], [process.getuid(), process.getgid()]);
  r = await box.exec('sh', '-c', 'echo no > /data/data.txt');
  assert.notEqual(r.exitCode, 0);
  assert.match(r.stderr, /Read-only/);
  assert.equal(fs.readFileSync(path.join(dir, 'ro', 'data.txt'), 'utf8'), 'from host\n');
  const info = await box.info();
  assert.deepEqual(info.volumes.map((v) => [v.guestPath, v.readOnly]), [['/work', false], ['/data', true]]);

  const missing = path.join(dir, 'nope');
  const bad = new SimpleBox({ image: 'alpine:latest', runtime, volumes: [{ hostPath: missing, guestPath: '/x' }] });
  const e = await rejection(bad.exec('true'));
  assert.equal(e.code, 'not_found');
  assert.ok(e.message.includes(missing), e.message);
});
