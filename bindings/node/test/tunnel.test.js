'use strict';
// Tunnels and the split network policy against real alpine boxes: a box with
// its network disabled serves HTTP on its loopback through forward() and
// connect() (with a half-close); a box created with BoxLite's
// network: {outbound: {mode, allowNet}} cannot fetch what the list leaves out,
// until updateOutbound allows it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, SimpleBox, BoxliteError } = require('..');
const { home, ensureImage, missingImage } = require('./helpers');

const skip = missingImage('alpine:latest');
const T = { timeout: 300_000 };
const SERVE = 'mkdir -p /srv && echo tunnel-page > /srv/index.html && exec httpd -f -p 127.0.0.1:8000 -h /srv';

function get(options) {
  return new Promise((resolve, reject) => {
    http.get({ ...options, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

test('tunnels to a box without a network', { skip, ...T }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime, network: { outbound: { mode: 'disabled' } } });
  const server = await box.spawn('sh', ['-c', SERVE]);
  t.after(async () => {
    await server.kill().catch(() => {});
    await box.stop();
    await runtime.close();
  });
  for (let i = 0; ; i++) {
    try {
      await (await (await box.tunnel(8000)).connect()).close();
      break;
    } catch (e) {
      if (e.code !== 'unreachable' || i > 150) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  await t.test('connect(): a request, the half-close, the answer to EOF', async () => {
    const tunnel = await box.network.tunnel(8000);
    assert.equal(tunnel.uri(), null);
    const conn = await tunnel.connect();
    await assert.rejects(tunnel.connect(), (e) => e.code === 'invalid_state');
    assert.equal(await conn.write('GET /index.html HTTP/1.0\r\nHost: box\r\n\r\n'), 39);
    await conn.shutdownWrite();
    const parts = [];
    for (;;) {
      const b = await conn.read(5);
      if (b.length === 0) break;
      parts.push(b);
    }
    await conn.close();
    const answer = Buffer.concat(parts).toString();
    assert.match(answer, /^HTTP\/1\.[01] 200/);
    assert.ok(answer.endsWith('tunnel-page\n'), answer);
    await assert.rejects(conn.read(1), (e) => e.code === 'closed');
  });

  await t.test('forward(): TCP and Unix listeners serve a host client', async () => {
    const fw = await (await box.network.tunnel(8000)).forward({ type: 'tcp', host: '127.0.0.1', port: 0 });
    const a = fw.localAddr();
    assert.equal(a.type, 'tcp');
    assert.ok(a.port > 0);
    for (let i = 0; i < 3; i++) assert.equal(await get({ host: a.host, port: a.port, path: '/index.html' }), 'tunnel-page\n');
    await fw.close();
    await fw.wait();
    const sock = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bxt-')), 'box.sock');
    const ufw = await (await box.tunnel(8000)).forward({ type: 'unix', path: sock });
    assert.equal(await get({ socketPath: sock, path: '/index.html' }), 'tunnel-page\n');
    await ufw.close();
    assert.ok(!fs.existsSync(sock), 'the socket file goes with the forwarder');
  });

  await t.test('bad listeners and closed ports', async () => {
    await assert.rejects((await box.tunnel(8000)).forward({ type: 'tcp', host: 'localhost', port: 0 }), /numeric IP/);
    await assert.rejects((await box.tunnel(8000)).forward({ type: 'unix', path: 'rel.sock' }), /absolute/);
    await assert.rejects(box.tunnel(0), (e) => e instanceof BoxliteError && e.code === 'invalid_argument');
    await assert.rejects((await box.tunnel(8001)).connect(), (e) => e.code === 'unreachable');
    const info = await box.getInfo();
    assert.equal(info.network.outbound.mode, 'disabled');
  });
});

test('outbound allowNet is honoured, and updateOutbound changes it on a running box', { skip, ...T }, async (t) => {
  const server = http.createServer((req, res) => res.end('reached'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime,
    network: { outbound: { mode: 'enabled', allowNet: ['example.com'] } } });
  t.after(async () => {
    await box.stop();
    await runtime.close();
    server.close();
  });
  // By address: the alias is reachable only when the list names it.
  // (busybox nc: the stand-in's wget segfaults where a lookup is involved)
  const fetch = ['sh', '-c', `out=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 20 nc -w 10 192.168.127.254 ${port} 2>&1); ` +
    'case "$out" in *reached) echo reached ;; *) echo blocked ;; esac'];
  let r = await box.exec(...fetch);
  assert.equal(r.stdout.trim(), 'blocked', r.stdout + r.stderr);
  let info = await box.getInfo();
  assert.deepEqual([info.network.outbound.mode, info.network.outbound.allowNet], ['enabled', ['example.com']]);
  await box.network.updateOutbound({ mode: 'enabled', allowNet: ['host.boxlite.internal'] });
  r = await box.exec(...fetch);
  assert.equal(r.stdout.trim(), 'reached', r.stdout + r.stderr);
  await box.network.updateOutbound({ mode: 'disabled' });
  r = await box.exec(...fetch);
  assert.equal(r.stdout.trim(), 'blocked', r.stdout + r.stderr);
  info = await box.getInfo();
  assert.equal(info.network.outbound.mode, 'disabled');
  assert.throws(() => new SimpleBox({ image: 'alpine:latest', network: { outbound: { mode: 'enabled', allowNet: [], bogus: 1 } } }), /bogus/);
  assert.throws(() => new SimpleBox({ image: 'alpine:latest', network: { outbound: { mode: 'enabled' }, allowNet: [] } }), /mix/);
});
