'use strict';
// imageRegistries (BoxLite's JsImageRegistry): a pull from a registry on
// loopback that wants basic auth fails without credentials (not_found,
// saying credentials) and works with them; a host alone is a search
// registry for unqualified names; the password is never in console.log of
// the runtime nor in an error. The registry is a small read-only OCI
// distribution server in this process; no box boots.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');
const zlib = require('node:zlib');
const { JsBoxlite, BoxliteError } = require('..');
const { localOnly, rejection } = require('./helpers');

const USER = 'alice';
const PASSWORD = 'pa55-' + crypto.randomBytes(6).toString('hex');
const sha = (b) => 'sha256:' + crypto.createHash('sha256').update(b).digest('hex');

/** A tar of one file (ustar). */
function tarOf(name, data) {
  const h = Buffer.alloc(512);
  h.write(name, 0);
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
  h.write('00000000000\0', 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  const body = Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
  return Buffer.concat([h, body, Buffer.alloc(1024)]);
}

function image() {
  const layerTar = tarOf('hello.txt', Buffer.from('hello from the registry\n'));
  const layer = zlib.gzipSync(layerTar);
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [sha(layerTar)] } }));
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha(config), size: config.length },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: sha(layer), size: layer.length }] }));
  return { blobs: { [sha(config)]: config, [sha(layer)]: layer }, manifest };
}

function serve({ blobs, manifest }) {
  const want = 'Basic ' + Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
  const seen = { unauthorized: 0 };
  const srv = http.createServer((req, res) => {
    const send = (code, body, type = 'application/json', extra = {}) => {
      res.writeHead(code, { 'Content-Type': type, 'Content-Length': body.length, ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.headers.authorization !== want) {
      seen.unauthorized++;
      return send(401, Buffer.from('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'), 'application/json', { 'WWW-Authenticate': 'Basic realm="boxlite-test"' });
    }
    if (req.url === '/v2/') return send(200, Buffer.from('{}'));
    if (req.url.startsWith('/v2/team/app/manifests/')) return send(200, manifest, 'application/vnd.oci.image.manifest.v1+json', { 'Docker-Content-Digest': sha(manifest) });
    const blob = req.url.startsWith('/v2/team/app/blobs/') && blobs[req.url.split('/').pop()];
    if (blob) return send(200, blob, 'application/octet-stream');
    send(404, Buffer.from('{"errors":[{"code":"NAME_UNKNOWN","message":"not here"}]}'));
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ srv, seen, host: `127.0.0.1:${srv.address().port}` })));
}

test('imageRegistries: basic auth, search, no credentials shown', { skip: localOnly('the registry and the store are this process\'s') }, async (t) => {
  const { srv, seen, host } = await serve(image());
  t.after(() => srv.close());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reg-'));
  const open = (name, regs) => {
    const rt = new JsBoxlite({ homeDir: path.join(dir, name), imageRegistries: regs });
    t.after(() => rt.close());
    return rt;
  };

  let rt = open('a', [{ host, transport: 'http' }]);
  let e = await rejection(rt.images.pull(`${host}/team/app:1`));
  assert.ok(e instanceof BoxliteError && e.code === 'not_found' && /credentials/.test(e.message), String(e));
  assert.ok(seen.unauthorized > 0);
  assert.deepEqual(await rt.images.list(), []);

  rt = open('b', [{ host, transport: 'http', auth: { username: USER, password: 'wrong-' + PASSWORD } }]);
  e = await rejection(rt.images.pull(`${host}/team/app:1`));
  assert.ok(e.code === 'not_found' && !e.message.includes(PASSWORD), String(e));

  rt = open('c', [{ host, transport: 'http', search: true, auth: { username: USER, password: PASSWORD } }]);
  assert.ok(!util.inspect(rt, { depth: 10 }).includes(PASSWORD) && !JSON.stringify(rt).includes(PASSWORD));
  const res = await rt.images.pull(`${host}/team/app:1`);
  assert.equal(res.reference, `${host}/team/app:1`);
  assert.equal((await rt.images.pull('team/app:2')).reference, `${host}/team/app:2`);

  for (const [regs, msg] of [
    [[{ host, transport: 'ftp' }], /transport/],
    [[{ host, auth: { username: USER } }], /password/],
    [[{ host, auth: { user: USER } }], /imageRegistries\[0\]\.auth\.user/],
    [[{ host, insecure: true }], /imageRegistries\[0\]\.insecure/],
    ['h:1', /array/],
  ]) {
    e = await rejection((async () => { const r = new JsBoxlite({ homeDir: path.join(dir, 'd'), imageRegistries: regs }); try { await r.images.list(); } finally { await r.close(); } })());
    assert.ok(e instanceof BoxliteError || e instanceof TypeError, String(e));
    assert.match(e.message, msg);
  }
});
