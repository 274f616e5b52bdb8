'use strict';
// Pause and resume with memory on one real box: a paused box has no shim or
// VMM process, says "paused" in its info and the runtime's metrics, and
// comes back as the same machine (its boot id, its /tmp), by the next exec
// or by resume().
const test = require('node:test');
const assert = require('node:assert/strict');
const { home, ensureImage, missingImage, localOnly } = require('./helpers');
const { JsBoxlite } = require('..');

const skip = missingImage('alpine:latest') || localOnly('a REST runtime refuses pause (unsupported)');
const T = { timeout: 240_000 };

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

test('pause and resume: no process while paused, the same machine after; fork', { skip, ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = await runtime.create({ image: 'alpine:latest', autoRemove: false });
  t.after(async () => {
    await box.remove(true).catch(() => {});
    await runtime.close();
  });
  await box.start();
  const before = (await box.run(['sh', '-c', 'echo 42 > /tmp/f; cat /proc/sys/kernel/random/boot_id'])).stdout.toString();
  const { shimPid, vmmPid } = (await box.info()).runtime;
  assert.ok(alive(shimPid) && alive(vmmPid));

  const saved = await box.pause();
  assert.ok(saved.stateBytes > 0 && saved.saveMs >= 0 && typeof saved.savedAt === 'string', JSON.stringify(saved));
  const info = await box.info();
  assert.equal(info.status, 'paused');
  assert.equal(info.state.running, false);
  assert.ok(!alive(shimPid) && !alive(vmmPid), 'a paused box has no process');
  assert.ok((await runtime.metrics()).numPausedBoxes >= 1);
  await box.pause(); // a paused box: no-op

  // the next exec resumes it, as the same machine
  const ex = await box.exec('sh', ['-c', 'cat /tmp/f; cat /proc/sys/kernel/random/boot_id']);
  let out = '';
  for await (const chunk of ex.stdout) out += chunk;
  assert.equal((await ex.wait()).exitCode, 0);
  assert.equal(out, '42\n' + before);
  assert.equal((await box.info()).status, 'running');
  assert.equal((await runtime.metrics()).numPausedBoxes, 0);

  await box.pause();
  await box.resume();
  await box.resume(); // running: no-op
  assert.equal((await box.info()).status, 'running');
  assert.equal((await box.run(['cat', '/proc/sys/kernel/random/boot_id'])).stdout.toString(), before);

  // fork: two running copies with /tmp/f, each its own machine
  const forks = await box.fork(2, ['node-fork-a']);
  try {
    assert.equal(forks.length, 2);
    assert.equal(forks[0].name, 'node-fork-a');
    const hosts = new Set([(await box.run(['hostname'])).stdout.toString()]);
    for (const f of forks) {
      assert.equal((await f.info()).status, 'running');
      const out = (await f.run(['sh', '-c', 'cat /tmp/f; hostname'])).stdout.toString();
      assert.ok(out.startsWith('42\n') && !hosts.has(out.slice(3)), `${out} ${[...hosts]}`);
      hosts.add(out.slice(3));
    }
    await assert.rejects(box.fork(0), (e) => e.code === 'invalid_argument');
    await assert.rejects(box.fork('2'), TypeError);
  } finally {
    for (const f of forks) await f.remove(true).catch(() => {});
  }

  await box.stop();
  await assert.rejects(box.fork(), (e) => e.code === 'invalid_state');
  await assert.rejects(box.pause(), (e) => e.code === 'invalid_state');
  await assert.rejects(box.resume(), (e) => e.code === 'invalid_state');
});
