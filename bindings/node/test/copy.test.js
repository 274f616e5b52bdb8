'use strict';
// copyIn / copyOut (the native copy service) against one real alpine box.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, SimpleBox, errorCode } = require('..');
const { home, ensureImage, missingImage, rejection } = require('./helpers');

test('copyIn / copyOut', { timeout: 300_000 }, async (t) => {
  assert.equal(missingImage('alpine:latest'), false, 'the alpine test image must exist (make images)');
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime, hostname: 'node-copy' });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bx-node-copy-'));
  t.after(async () => {
    await box.stop();
    await runtime.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const src = path.join(dir, 'tree');
  fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
  const blob = crypto.randomBytes(4 << 20);
  fs.writeFileSync(path.join(src, 'sub', 'blob'), blob);
  fs.writeFileSync(path.join(src, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
  fs.symlinkSync('sub/blob', path.join(src, 'link'));

  const h = await box.exec('hostname');
  assert.equal(h.stdout, 'node-copy\n', 'the box takes the hostname it was given');
  const rt = (await box.getInfo()).runtime;
  assert.ok(['template', 'new-template'].includes(rt.start), `a fresh box starts warm, not ${rt.start} (${rt.startNote})`);

  await box.copyIn(src, '/root/node/');
  const r = await box.exec('sh', '-c', 'cd /root/node/tree && ./run.sh && readlink link && sha256sum sub/blob');
  assert.equal(r.exitCode, 0, r.stderr);
  const [ran, link, sum] = r.stdout.trim().split('\n');
  assert.equal(ran, 'ran');
  assert.equal(link, 'sub/blob');
  assert.equal(sum.split(' ')[0], crypto.createHash('sha256').update(blob).digest('hex'));

  const back = path.join(dir, 'back', 'tree'); // BoxLite's layout: back made, the directory inside
  await box.copyOut('/root/node/tree', path.join(dir, 'back'), { maxBytes: 8 << 20 });
  assert.ok(fs.readFileSync(path.join(back, 'sub', 'blob')).equals(blob));
  assert.equal(fs.statSync(path.join(back, 'run.sh')).mode & 0o777, 0o755);
  assert.equal(fs.readlinkSync(path.join(back, 'link')), 'sub/blob');

  const contents = path.join(dir, 'contents');
  await box.copyOut('/root/node/tree', contents, { includeParent: false });
  assert.deepEqual(fs.readdirSync(contents).sort(), ['link', 'run.sh', 'sub']);

  let e = await rejection(box.copyIn(path.join(src, 'run.sh'), '/root/node/tree/run.sh', { overwrite: false }));
  assert.equal(errorCode(e), 'already_exists');
  e = await rejection(box.copyOut('/no/such', path.join(dir, 'x')));
  assert.equal(errorCode(e), 'not_found');
  assert.match(e.message, /\/no\/such/);
  e = await rejection(box.copyOut('/bin/busybox', path.join(dir, 'x'), { maxBytes: 1024 }));
  assert.equal(errorCode(e), 'limit');
  assert.ok(!fs.existsSync(path.join(dir, 'x')));
  await assert.rejects(box.copyIn(src, '/x', { bogus: true }), TypeError);
  e = await rejection(box.copyOut('/root/node', path.join(dir, 'y'), { maxEntries: -1 }));
  assert.equal(errorCode(e), 'invalid_argument');
  await assert.rejects(box.copyIn(src, '/x', { layout: 'rsync' }), TypeError);

  // BoxLite 0.10's cp.js: copyIn(dir, '/app') with no /app, copyOut('/app', out)
  // finds the file at out/app/<dir name>/hello.txt.
  const hostDir = path.join(dir, 'boxlite_node_copy');
  fs.mkdirSync(hostDir);
  fs.writeFileSync(path.join(hostDir, 'hello.txt'), 'hello from node\n');
  await box.copyIn(hostDir, '/app', {});
  assert.equal((await box.exec('ls', '/app')).stdout, 'boxlite_node_copy\n');
  const outDir = path.join(dir, 'boxlite_node_copy_out');
  fs.mkdirSync(outDir);
  await box.copyOut('/app', outDir, {});
  assert.equal(fs.readFileSync(path.join(outDir, 'app', path.basename(hostDir), 'hello.txt'), 'utf8'), 'hello from node\n');
  // docker cp's layout on request: a missing destination becomes the copy.
  await box.copyIn(hostDir, '/app-docker', { layout: 'docker' });
  assert.equal((await box.exec('cat', '/app-docker/hello.txt')).stdout, 'hello from node\n');
});
