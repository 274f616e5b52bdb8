'use strict';
// Output collected from a command is capped per stream (outputLimitBytes,
// default 64 MiB): the rest is read and dropped, the result says so, the host
// does not grow with the box's output. One alpine box.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { JsBoxlite, SimpleBox } = require('..');
const { ShellSession, truncationMarker } = require('../lib/session');
const { home, ensureImage, missingImage, thrown } = require('./helpers');

const skip = missingImage('alpine:latest');
const T = { timeout: 600_000 };
const MiB = 1 << 20;
const BIG = `head -c ${96 * MiB} /dev/zero; echo err >&2`; // 96 MiB of stdout, then a line of stderr

function vm(key) {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
  return Number(m[1]) * 1024;
}

/** Resets VmHWM to the current RSS (Linux clear_refs); returns that RSS. */
function resetPeak() {
  fs.writeFileSync('/proc/self/clear_refs', '5');
  return vm('VmRSS');
}

const seq = (n) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join('');

test('output limit', { skip, ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime });
  t.after(async () => {
    await box.stop();
    await runtime.close();
  });
  assert.equal(runtime.outputLimitBytes, 64 * MiB);

  await t.test('SimpleBox.exec keeps 64 MiB of stdout and the host stays small', async () => {
    const base = resetPeak();
    let r = await box.exec('sh', '-c', BIG);
    const grew = vm('VmHWM') - base;
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.length, 64 * MiB);
    assert.equal(r.stdoutTruncated, true);
    assert.equal(r.stderr, 'err\n');
    assert.equal(r.stderrTruncated, false);
    r = null;
    t.diagnostic(`exec of 96 MiB: peak RSS grew by ${(grew / MiB).toFixed(0)} MiB`);
    assert.ok(grew < 300 * MiB, `peak RSS grew by ${(grew / MiB).toFixed(0)} MiB`);
  });

  await t.test('a limit per call', async () => {
    const full = seq(20000);
    let r = await box.exec('sh', ['-c', 'seq 1 20000; seq 1 20000 >&2'], undefined, { outputLimitBytes: 1000 });
    assert.equal(r.stdout, full.slice(0, 1000));
    assert.equal(r.stderr, full.slice(0, 1000));
    assert.ok(r.stdoutTruncated && r.stderrTruncated);
    r = await box.exec('sh', ['-c', 'seq 1 20000'], undefined, { outputLimitBytes: full.length });
    assert.equal(r.stdout, full);
    assert.equal(r.stdoutTruncated, false, 'exactly the limit: nothing dropped');
    r = await box.exec('echo', 'small');
    assert.deepEqual(r, { exitCode: 0, stdout: 'small\n', stderr: '', stdoutTruncated: false, stderrTruncated: false });
  });

  await t.test('the limit is checked', async () => {
    for (const [bad, cls] of [[0, RangeError], [-1, RangeError], [1.5, TypeError], ['10', TypeError], [true, TypeError]]) {
      await assert.rejects(box.exec('true', [], undefined, { outputLimitBytes: bad }), (e) => e instanceof cls && /outputLimitBytes/.test(e.message));
    }
    assert.ok(thrown(() => new JsBoxlite({ outputLimitBytes: 0 })) instanceof RangeError);
    const b = await box.getBox();
    await assert.rejects(b.exec({ cmd: 'true', outputLimitBytes: 5 }), (e) => e instanceof TypeError && /streams/.test(e.message));
  });

  await t.test('the truncation line of CodeBox.run', () => {
    assert.equal(truncationMarker(true, false, 3), '\n[output truncated: stdout was longer than 3 bytes; the rest was dropped]\n');
    assert.equal(truncationMarker(false, false, 3), '');
  });

  await t.test(`Box.run keeps 64 MiB of stdout`, async () => {
    const b = await box.getBox();
    const base = resetPeak();
    let r = await b.run(['sh', '-c', BIG]);
    const grew = vm('VmHWM') - base;
    assert.equal(r.stdout.length, 64 * MiB);
    assert.ok(r.stdoutTruncated && !r.stderrTruncated);
    assert.equal(r.stderr.toString(), 'err\n');
    r = null;
    assert.ok(grew < 300 * MiB, `peak RSS grew by ${(grew / MiB).toFixed(0)} MiB`);
  });

  await t.test(`Box.run and the shell session with a limit per call`, async () => {
    const b = await box.getBox();
    let r = await b.run(['sh', '-c', 'seq 1 20000; echo e >&2'], { outputLimitBytes: 1000 });
    assert.equal(r.stdout.length, 1000);
    assert.ok(r.stdoutTruncated && !r.stderrTruncated);
    r = await b.run(['echo', 'small']);
    assert.ok(!r.stdoutTruncated && !r.stderrTruncated);
    const sh = await ShellSession._start(b); // what InteractiveBox.exec runs in
    try {
      r = await sh.exec(['eval', 'seq 1 20000'], { outputLimitBytes: 1000 });
      assert.equal(r.stdout, seq(20000).slice(0, 1000));
      assert.ok(r.stdoutTruncated);
      r = await sh.exec(['echo', 'hi']);
      assert.deepEqual(r, { exitCode: 0, stdout: 'hi\n', stderr: '', stdoutTruncated: false, stderrTruncated: false });
    } finally {
      sh.close();
    }
  });

  await t.test(`the runtime option`, async () => {
    const rt = new JsBoxlite({ homeDir: home, outputLimitBytes: 4096 });
    const small = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime: rt });
    try {
      const e = await small.exec('sh', '-c', 'seq 1 20000');
      assert.equal(e.stdout.length, 4096);
      assert.ok(e.stdoutTruncated);
      const r = await (await small.getBox()).run(['sh', '-c', 'seq 1 20000']);
      assert.equal(r.stdout.length, 4096);
      assert.ok(r.stdoutTruncated);
    } finally {
      await small.stop();
      await rt.close();
    }
  });
});
