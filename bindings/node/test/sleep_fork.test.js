'use strict';
// Boxes that sleep and wake, in Node: a CodeBox's interpreter outlives its
// runtime and a pause (a named session: a second runtime's CodeBox on the
// box takes it over); a CodeBox forks with its interpreter; a snapshot
// keeps a running box's memory.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { home, ensureImage, missingImage, localOnly } = require('./helpers');
const { JsBoxlite, CodeBox } = require('..');

const skip = missingImage('python:slim') || localOnly('named sessions, pause and fork need a local runtime');
const T = { timeout: 600_000 };

test('a CodeBox interpreter outlives its runtime and a pause; fork(2) copies it', { skip, ...T }, async (t) => {
  const name = `node-wake-${crypto.randomBytes(4).toString('hex')}`;
  const rt1 = new JsBoxlite({ homeDir: home });
  await ensureImage(rt1, 'python:slim');
  const cb1 = new CodeBox({ runtime: rt1, name, reuseExisting: true, autoRemove: false, detach: true, memoryMib: 512 });
  t.after(async () => {
    const rt = new JsBoxlite({ homeDir: home });
    await rt.remove(name, true).catch(() => {});
    await rt.close();
  });
  await cb1.run("x = 42\nf = open('/tmp/notes', 'w+')\nf.write('still open')\nf.flush()");
  await cb1.pause();
  await rt1.close(); // the client is gone; the box sleeps

  const rt2 = new JsBoxlite({ homeDir: home });
  t.after(() => rt2.close());
  const cb2 = new CodeBox({ runtime: rt2, name, reuseExisting: true });
  assert.equal(await cb2.run('f.seek(0)\nprint(x, f.read())'), '42 still open\n');

  const forks = await cb2.fork(2);
  t.after(async () => {
    for (const f of forks) await f.stop().catch(() => {});
  });
  assert.equal(forks.length, 2);
  assert.ok(forks.every((f) => f instanceof CodeBox));
  await forks[0].run('x = 7');
  assert.deepEqual(await Promise.all(forks.map((f) => f.run('print(x)'))), ['7\n', '42\n']);
  assert.equal(await cb2.run('print(x)'), '42\n');
  const boots = new Set();
  for (const b of [cb2, ...forks]) boots.add(await b.run("print(open('/proc/sys/kernel/random/boot_id').read().strip())"));
  assert.equal(boots.size, 3);
  assert.throws(() => new CodeBox({ sessionName: 5 }), TypeError);
});

test('a snapshot keeps a running box\'s memory', { skip: missingImage('alpine:latest') || localOnly('memory snapshots need a local runtime'), ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = await runtime.create({ image: 'alpine:latest', autoRemove: false });
  t.after(async () => {
    await box.remove(true).catch(() => {});
    await runtime.close();
  });
  await box.start();
  await box.run(['sh', '-c', 'echo one > /root/f; sync']);
  const si = await box.snapshot.create('m', { memory: true });
  assert.ok(si.memory && si.memoryBytes > 0, JSON.stringify(si));
  await assert.rejects(box.snapshot.create('x', { memry: true }), TypeError);
  await box.run(['sh', '-c', 'echo two > /root/f; sync']);
  await box.stop();
  await box.snapshot.restore('m');
  assert.equal((await box.info()).status, 'paused');
  assert.equal((await box.run(['cat', '/root/f'])).stdout.toString(), 'one\n');
});
