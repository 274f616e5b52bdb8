'use strict';
// BoxLite's lifecycle on one real box: create gives a configured box (no
// VM), start boots it, stop keeps its disk, exec on the stopped box starts it
// again; entrypoint and cmd are what a bare exec runs. Two boots.
const test = require('node:test');
const assert = require('node:assert/strict');
const { JsBoxlite } = require('..');
const { home, ensureImage, missingImage } = require('./helpers');

const skip = missingImage('alpine:latest');
const T = { timeout: 240_000 };

test('lifecycle: configured, start, stop, exec on a stopped box', { skip, ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = await runtime.create({ image: 'alpine:latest', memoryMib: 256, autoRemove: false, detach: false, cmd: ['-c', 'echo from-cmd'], entrypoint: ['sh'] });
  t.after(async () => {
    await box.remove(true).catch(() => {});
    await runtime.close();
  });

  let info = await box.info();
  assert.equal(info.status, 'configured');
  assert.equal(info.state.running, false);
  assert.equal(info.runtime, undefined);
  await box.stop(); // a configured box: no-op, and it stays
  assert.equal((await box.info()).status, 'configured');

  await box.start();
  await box.start(); // running: no-op
  info = await box.info();
  assert.equal(info.status, 'running');
  assert.ok(info.runtime && info.runtime.shimPid > 0);
  const shim = info.runtime.shimPid;
  const r = await box.run(['sh', '-c', 'echo kept > /root/f && sync']);
  assert.equal(r.exitCode, 0);
  const bare = await box.run([]); // the box's entrypoint and cmd
  assert.equal(bare.stdout.toString(), 'from-cmd\n');

  await box.stop();
  assert.equal((await box.info()).status, 'stopped');
  const ex = await box.exec('cat', ['/root/f']); // starts the stopped box first
  let out = '';
  for await (const chunk of ex.stdout) out += chunk;
  assert.equal((await ex.wait()).exitCode, 0);
  assert.equal(out, 'kept\n');
  info = await box.info();
  assert.equal(info.status, 'running');
  assert.notEqual(info.runtime.shimPid, shim);

  await assert.rejects(runtime.create({ image: 'alpine:latest', detach: 'yes' }), TypeError);
  await assert.rejects(runtime.create({ image: 'alpine:latest', entrypoint: 'sh' }), TypeError);
});
