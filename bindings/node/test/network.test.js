'use strict';
// Networking against one real alpine box: a host server through
// host.boxlite.internal, a published port, and bad options that fail typed
// before anything boots.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const net = require('node:net');
const { JsBoxlite, SimpleBox, BoxliteError } = require('..');
const { home, ensureImage, missingImage, rejection, thrown, shimChildren } = require('./helpers');

const skip = missingImage('alpine:latest');
const T = { timeout: 240_000 };

test('network', { skip, ...T }, async (t) => {
  const token = crypto.randomBytes(8).toString('hex');
  const server = http.createServer((req, res) => res.end(req.url === '/token' ? token : 'nope'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hostPort = server.address().port;

  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime, ports: [{ guestPort: 8000 }] });
  t.after(async () => {
    await box.stop();
    await runtime.close();
    server.close();
  });

  await t.test('info shows the network and the port as bound', async () => {
    const info = await box.getInfo(); // boots the box
    assert.equal(info.networkMode, 'enabled');
    assert.ok(info.network.guestIp && info.network.gatewayIp, JSON.stringify(info.network));
    assert.equal(info.ports.length, 1);
    const [p] = info.ports;
    assert.deepEqual([p.guestPort, p.protocol, p.hostIp], [8000, 'tcp', '127.0.0.1']);
    assert.ok(p.hostPort > 0 && p.hostPort < 65536, 'host port 0 picks a free one');
    assert.deepEqual(info.runtime.network.ports, info.ports);
  });

  await t.test('the box reaches the host as host.boxlite.internal', async () => {
    const r = await box.exec('timeout', ['60', 'wget', '-q', '-O-', `http://host.boxlite.internal:${hostPort}/token`], undefined, { timeoutSecs: 90 });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout, token);
  });

  await t.test('a published port reaches a server in the box', async () => {
    const bound = (await box.info()).ports[0].hostPort;
    await box.exec('sh', '-c', 'mkdir -p /www && echo from-the-box > /www/index.html');
    const ex = await box.spawn('httpd', ['-f', '-p', '8000', '-h', '/www'], { timeoutSecs: 120 });
    try {
      const deadline = Date.now() + 60_000;
      let body;
      for (;;) {
        try {
          body = await (await fetch(`http://127.0.0.1:${bound}/index.html`, { signal: AbortSignal.timeout(10_000) })).text();
          break;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 300));
        }
      }
      assert.equal(body, 'from-the-box\n');
    } finally {
      await ex.kill();
    }
  });

  await t.test('bad options are typed errors, raised before anything boots', async () => {
    const before = shimChildren();
    for (const [opts, re] of [
      [{ network: 'bridged' }, /mode/],
      [{ network: { mode: 'disabled' }, ports: [{ guestPort: 80 }] }, /disabled/],
      [{ network: { allowNet: ['bad host!'] } }, /bad host/],
      [{ ports: [{ guestPort: 70000 }] }, /70000/],
      [{ ports: [{ guestPort: 80, protocol: 'sctp' }] }, /sctp/],
    ]) {
      const e = await rejection(runtime.create({ image: 'alpine:latest', ...opts }));
      assert.ok(e instanceof BoxliteError && e.code === 'invalid_argument' && re.test(e.message), `${JSON.stringify(opts)}: ${e}`);
    }
    assert.ok([...shimChildren()].every((p) => before.has(p)), 'nothing booted');
    assert.ok(thrown(() => new SimpleBox({ image: 'alpine:latest', ports: [80] })) instanceof TypeError);
    assert.ok(thrown(() => new SimpleBox({ image: 'alpine:latest', ports: [{ guest: 80 }] })) instanceof TypeError);
    assert.ok(thrown(() => new SimpleBox({ image: 'alpine:latest', network: { allowNet: 'pypi.org' } })) instanceof TypeError);
  });

  await t.test('a host port in use is already_exists', async () => {
    const busy = net.createServer();
    await new Promise((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const port = busy.address().port;
      const box = await runtime.create({ image: 'alpine:latest', memoryMib: 256, autoRemove: true, ports: [{ hostPort: port, guestPort: 80 }] });
      try {
        const e = await rejection(box.start()); // created configured: the port is bound at start
        assert.ok(e instanceof BoxliteError && e.code === 'already_exists' && e.message.includes(String(port)), String(e));
      } finally {
        await box.remove(true); // a failed first start leaves the box removable
      }
    } finally {
      busy.close();
    }
  });
});
