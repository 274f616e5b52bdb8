'use strict';
// Unknown options are errors at every depth, naming the key; BoxLite 0.10's
// network: {outbound: {mode, allowNet}} is honoured (a blocked fetch fails),
// as is the pre-split {mode, allowNet}.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { JsBoxlite, SimpleBox, CodeBox, BoxliteRestOptions } = require('..');
const { home, ensureImage, missingImage, rejection, thrown, shimChildren, localOnly } = require('./helpers');

const skip = missingImage('alpine:latest');

test('an unknown option is a TypeError naming it, at every depth', async () => {
  const image = 'alpine:latest';
  const cases = [
    [{ image, imagee: 'x' }, 'options.imagee'],
    [{ image, network: { outbound: { mode: 'enabled', alowNet: ['a'] } } }, 'options.network.outbound.alowNet'],
    [{ image, network: { mode: 'enabled', allow_net: ['a'] } }, 'options.network.allow_net'],
    [{ image, network: { outbund: { mode: 'enabled' } } }, 'options.network.outbund'],
    [{ image, volumes: [{ hostPath: '/tmp', guestPath: '/x', readonly: true }] }, 'options.volumes[0].readonly'],
    [{ image, ports: [{ guestPort: 80, hostport: 1 }] }, 'options.ports[0].hostport'],
    [{ image, env: [{ key: 'A', value: 'b', extra: 1 }] }, 'options.env[0].extra'],
    [{ image, secrets: [{ name: 'K', value: 'v', hosts: ['a.example'], host: 'b' }] }, 'options.secrets[0].host'],
    [{ image, network: { inbound: { mode: 'enabled', alowNet: [] } } }, 'options.network.inbound.alowNet'],
  ];
  for (const [opts, key] of cases) {
    for (const make of [(o) => new SimpleBox(o), (o) => new CodeBox(o)]) {
      const e = thrown(() => make(opts));
      assert.ok(e instanceof TypeError && e.message.includes(`${key} is not a known option`), `${JSON.stringify(opts)}: ${e}`);
    }
  }
  const rt = new JsBoxlite({ homeDir: home });
  try {
    for (const [opts, key] of cases) {
      const e = await rejection(rt.create(opts));
      assert.ok(e instanceof TypeError && e.message.includes(key), `create ${JSON.stringify(opts)}: ${e}`);
    }
  } finally {
    await rt.close();
  }
  assert.throws(() => new JsBoxlite({ homeDirr: '/tmp' }), /homeDirr is not a known option/);
  assert.throws(() => new JsBoxlite({ warmPools: [{ size: 1, box: { image, imagee: 'x' } }] }), /options.warmPools\[0\].box.imagee is not a known option/);
  assert.throws(() => new JsBoxlite({ warmPools: { size: 1 } }), /options.warmPools must be an array/);
  assert.throws(() => new JsBoxlite({ warmPools: [{ size: 1, box: { image }, sise: 2 }] }), /options.warmPools\[0\].sise is not a known option/);
  assert.throws(() => new BoxliteRestOptions({ url: 'http://127.0.0.1:1', retries: 3 }), /retries is not a known option/);
  // Both network forms at once: which would win is not obvious.
  assert.throws(() => new SimpleBox({ image, network: { mode: 'enabled', outbound: { mode: 'enabled' } } }), /cannot mix outbound\/inbound with the deprecated mode\/allowNet/);
  assert.throws(() => new SimpleBox({ image, network: { outbound: 'enabled' } }), /network.outbound must be/);
});

test('network.outbound.allowNet is honoured', { skip: skip || localOnly('host.boxlite.internal is the local host'), timeout: 300_000 }, async (t) => {
  const serve = (body) => new Promise((resolve) => {
    const s = http.createServer((req, res) => res.end(body));
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  const allowed = await serve('allowed');
  const blocked = await serve('blocked');
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const port = (s) => s.address().port;
  const before = shimChildren();
  const box = new SimpleBox({
    image: 'alpine:latest', memoryMib: 256, runtime,
    network: { outbound: { mode: 'enabled', allowNet: [`host.boxlite.internal:${port(allowed)}`] } },
  });
  t.after(async () => {
    await box.stop();
    await runtime.shutdown(30); // BoxLite's shutdown(timeout)
    allowed.close();
    blocked.close();
  });
  const get = (p) => box.exec('timeout', ['30', 'wget', '-q', '-O-', `http://host.boxlite.internal:${p}/`], undefined, { timeoutSecs: 60 });
  const ok = await get(port(allowed));
  assert.equal(ok.exitCode, 0, ok.stderr);
  assert.equal(ok.stdout, 'allowed');
  const no = await get(port(blocked));
  assert.notEqual(no.exitCode, 0, `a port not in outbound.allowNet answered: ${no.stdout}`);
  assert.notEqual(no.stdout, 'blocked');
  const info = await box.getInfo();
  assert.deepEqual(info.network.allowNet, [`host.boxlite.internal:${port(allowed)}`], JSON.stringify(info.network));
  assert.ok([...shimChildren()].some((p) => !before.has(p)), 'the box booted');
  // BoxLite 0.10's info fields
  assert.ok(info.startedAt && info.lastActivityAt >= info.startedAt, JSON.stringify([info.startedAt, info.lastActivityAt]));
  assert.equal(info.autoDelete, 1);
  await assert.rejects(runtime.shutdown('soon'), TypeError);
});
