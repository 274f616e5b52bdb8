'use strict';
// The raw layer (src/: the table of calls.c run by engine.c): one function per C function, typed errors,
// and no crash on bad input, freed or mistyped handles.
const test = require('node:test');
const assert = require('node:assert/strict');
const v8 = require('node:v8');
const vm = require('node:vm');
const raw = require('../lib/raw');
const { home, images, missingImage } = require('./helpers');

const T = { timeout: 180_000 };
const json = JSON.stringify;

function gc() {
  v8.setFlagsFromString('--expose-gc');
  vm.runInNewContext('gc')();
}

function code(fn) {
  try {
    fn();
  } catch (e) {
    return `${e.constructor.name}:${e.code}`;
  }
  return 'no error';
}

test('library functions and constants', () => {
  assert.equal(raw.version(), raw.VERSION_STRING);
  assert.equal(raw.statusName(raw.ERR_NOT_FOUND), 'not_found');
  assert.equal(raw.statusName(raw.AGAIN), 'again');
  assert.equal(raw.statusName(12345), 'unknown');
  assert.equal(raw.STDOUT, 1);
  assert.equal(raw.STDERR, 2);
});

test('wrong types are TypeErrors naming the parameter, without a runtime', () => {
  for (const [fn, args, param] of [
    ['boxInfo', [123], 'box'],
    ['boxInfo', [{}], 'box'],
    ['boxExec', [null, '{}'], 'box'],
    ['executionRead', [undefined, 1, 10, 0], 'ex'],
    ['imageList', ['rt'], 'rt'],
    ['boxMetrics', [7], 'box'],
    ['runtimeMetrics', [null], 'rt'],
    ['runtimeNew', [42], 'optionsJson'],
    ['statusName', ['x'], 'code'],
  ]) {
    assert.throws(() => raw[fn](...args), (e) => e instanceof TypeError && e.code === 'invalid_argument' && e.message.startsWith(param), `${fn}`);
  }
});

test('raw layer against a real box', { skip: missingImage('alpine:latest'), ...T }, async (t) => {
  const rt = await raw.runtimeNew(json({ home }));
  const loaded = JSON.parse(raw.imageList(rt));
  if (!loaded.some((i) => i.name.endsWith('alpine:latest'))) await raw.imageLoad(rt, images['alpine:latest']);
  const box = await raw.boxCreate(rt, json({ image: 'alpine:latest', memory_mib: 256 }));
  t.after(async () => {
    await raw.boxRemove(box, true).catch(() => {});
    raw.boxFree(box);
    await raw.runtimeFree(rt);
  });

  await t.test('boxRun collects output and the exit', async () => {
    const r = await raw.boxRun(box, json({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] }));
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout.toString(), 'out\n');
    assert.equal(r.stderr.toString(), 'err\n');
    const to = await raw.boxRun(box, json({ argv: ['sleep', '10'], timeout_secs: 0.3 }));
    assert.equal(to.timedOut, true);
  });

  await t.test('exec, watch the fd, read with timeout 0, wait', async () => {
    const ex = raw.boxExec(box, json({ argv: ['sh', '-c', 'sleep 0.2; echo hi; echo there >&2'] }));
    assert.ok(raw.executionFd(ex) >= 0);
    let out = '';
    let err = '';
    let eofs = 0;
    while (eofs < 2) {
      await raw.executionWatchFd(ex);
      eofs = 0;
      for (const [s, add] of [[raw.STDOUT, (b) => (out += b)], [raw.STDERR, (b) => (err += b)]]) {
        for (;;) {
          const r = raw.executionRead(ex, s, 4096, 0);
          if (Buffer.isBuffer(r)) add(r);
          else {
            if (r === raw.EOF) eofs++;
            break;
          }
        }
      }
    }
    assert.equal(out, 'hi\n');
    assert.equal(err, 'there\n');
    // (not executionWait(ex, 0): the library can end both streams a moment before it reports the exit)
    assert.deepEqual(await raw.executionWait(ex, 5000), { exitCode: 0, signal: 0, timedOut: false });
    raw.executionFree(ex);
    raw.executionFree(ex); // twice is fine
  });

  await t.test('blocking read and wait run on the pool and return promises', async () => {
    const ex = raw.boxExec(box, json({ argv: ['sh', '-c', 'read x; echo $x'], stdin: true }));
    assert.equal(await raw.executionRead(ex, raw.STDOUT, 16, 50), raw.AGAIN);
    await raw.executionWrite(ex, Buffer.from('ping\n'));
    raw.executionCloseStdin(ex);
    assert.equal((await raw.executionRead(ex, raw.STDOUT, 16, -1)).toString(), 'ping\n');
    assert.equal(await raw.executionRead(ex, raw.STDOUT, 16, -1), raw.EOF);
    assert.equal((await raw.executionWait(ex, -1)).exitCode, 0);
    raw.executionFree(ex);
  });

  await t.test('freed and mistyped handles give typed errors, never a crash', async () => {
    const ex = raw.boxExec(box, json({ argv: ['sleep', '30'] }));
    const watched = raw.executionWatchFd(ex);
    assert.equal(code(() => raw.executionWatchFd(ex)), 'Error:invalid_state');
    raw.executionFree(ex); // kills it, and ends the watch
    await assert.rejects(watched, (e) => e.code === 'closed');
    assert.equal(code(() => raw.executionWait(ex, 0)), 'Error:invalid_argument');
    assert.equal(code(() => raw.executionRead(ex, 1, 8, 0)), 'Error:invalid_argument');
    assert.equal(code(() => raw.executionKill(ex)), 'Error:invalid_argument');
    assert.equal(code(() => raw.executionWatchFd(ex)), 'Error:invalid_argument');
    await assert.rejects(raw.executionRead(ex, 1, 8, -1), (e) => e.code === 'invalid_argument');
    await assert.rejects(raw.executionWrite(ex, Buffer.from('x')), (e) => e.code === 'invalid_argument');
    assert.equal(raw.executionFd(ex), -1);
    // a handle of one kind where another is wanted
    assert.equal(code(() => raw.boxInfo(rt)), 'TypeError:invalid_argument');
    assert.equal(code(() => raw.imageList(box)), 'TypeError:invalid_argument');
    assert.equal(code(() => raw.executionRead(box, 1, 8, 0)), 'TypeError:invalid_argument');
    // a freed box handle
    const b2 = await raw.boxGet(rt, raw.boxId(box));
    raw.boxFree(b2);
    assert.equal(code(() => raw.boxInfo(b2)), 'Error:invalid_argument');
    assert.equal(code(() => raw.boxId(b2)), 'Error:invalid_argument');
    await assert.rejects(raw.boxStop(b2), (e) => e.code === 'invalid_argument');
    assert.equal(code(() => raw.boxExec(b2, json({ argv: ['true'] }))), 'Error:invalid_argument');
  });

  await t.test('bad arguments of a valid handle', async () => {
    assert.equal(code(() => raw.boxExec(box, '{not json')), 'Error:invalid_argument');
    assert.equal(code(() => raw.boxExec(box, json({ argv: [''] }))), 'Error:invalid_argument');
    assert.equal(code(() => raw.boxExec(box, json({ argv: ['true'], bogus: 1 }))), 'Error:invalid_argument');
    assert.equal(code(() => raw.boxExec(box, 'a\0b')), 'TypeError:invalid_argument');
    // not in the store: not_found, or whatever the pull says when no registry is reachable
    await assert.rejects(raw.boxCreate(rt, json({ image: 'nope:1' })), (e) => typeof e.code === 'string' && /nope:1/.test(e.message));
    await assert.rejects(raw.boxCreate(rt, json({ image: 'alpine:latest', cpus: 'two' })), (e) => e.code === 'invalid_argument');
    await assert.rejects(raw.boxGet(rt, 'no-such-box'), (e) => e.code === 'not_found');
    await assert.rejects(raw.boxRemove(box, false), (e) => e.code === 'invalid_state');
    assert.throws(() => raw.boxRemove(box, 'yes'), { name: 'TypeError', message: /force must be a boolean/ });
    const ex = raw.boxExec(box, json({ argv: ['sleep', '30'] }));
    assert.equal(code(() => raw.executionRead(ex, 7, 8, 0)), 'Error:invalid_argument');
    assert.equal(code(() => raw.executionRead(ex, 1, 0, 0)), 'RangeError:invalid_argument');
    assert.equal(code(() => raw.executionRead(ex, 1, 1e12, 0)), 'RangeError:invalid_argument');
    assert.equal(code(() => raw.executionRead(ex, 1, 8, NaN)), 'TypeError:invalid_argument');
    assert.equal(code(() => raw.executionSignal(ex, 0)), 'Error:invalid_argument');
    assert.equal(code(() => raw.executionSignal(ex, 2.5)), 'RangeError:invalid_argument');
    assert.equal(code(() => raw.executionResize(ex, 24, 80)), 'Error:invalid_state');
    assert.equal(code(() => raw.executionCloseStdin(ex)), 'Error:invalid_state');
    await assert.rejects(raw.executionWrite(ex, Buffer.from('x')), (e) => e.code === 'invalid_state');
    assert.equal(code(() => raw.executionWrite(ex, 'str')), 'TypeError:invalid_argument');
    assert.equal(raw.executionWait(ex, 0), raw.AGAIN);
    assert.equal(await raw.executionWait(ex, 30), raw.AGAIN);
    raw.executionFree(ex);
  });

  await t.test('huge arguments', async () => {
    const big = json({ argv: ['echo', 'x'.repeat(16 << 20)] });
    await assert.rejects(raw.boxRun(box, big), (e) => ['limit', 'invalid_argument'].includes(e.code));
    assert.ok(['Error:limit', 'Error:invalid_argument'].includes(code(() => raw.boxExec(box, big))));
    assert.equal((await raw.boxRun(box, json({ argv: ['echo', 'ok'] }))).stdout.toString(), 'ok\n');
  });

  await t.test('handles dropped without free are freed by the GC', async () => {
    for (let i = 0; i < 50; i++) raw.boxExec(box, json({ argv: ['sleep', '30'] }));
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    // the library still works, and the box is not cluttered by 50 sleeping processes
    const r = await raw.boxRun(box, json({ argv: ['sh', '-c', 'ps | grep -c "[s]leep 30"'] }));
    assert.ok(Number(r.stdout.toString()) < 50, `sleeps left: ${r.stdout}`);
  });

  await t.test('a freed runtime', async () => {
    const rt2 = await raw.runtimeNew(json({ home }));
    await raw.runtimeFree(rt2);
    await raw.runtimeFree(rt2);
    assert.equal(code(() => raw.imageList(rt2)), 'Error:invalid_argument');
    await assert.rejects(raw.boxCreate(rt2, json({ image: 'alpine:latest' })), (e) => e.code === 'invalid_argument');
    await assert.rejects(raw.runtimeNew('{"homee": "/tmp"}'), (e) => e.code === 'invalid_argument');
  });
});
