'use strict';
// Secrets: Secret's shape (BoxLite's {name, value, hosts, placeholder}), bad
// specs refused before anything boots, and one python:slim box whose secret
// reaches an HTTPS server on the host's loopback (its certificate from a test
// CA the host trusts through SSL_CERT_FILE) while the box sees only the
// placeholder. The box runs in a child node: the shim reads the host's trust
// store from the environment the library was loaded with (Go copies it at
// load), so SSL_CERT_FILE is set before then, as a user sets it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, SimpleBox, Secret, BoxliteError } = require('..');
const { pkg, home, ensureImage, missingImage, localOnly, rejection } = require('./helpers');

const ALIAS = 'host.boxlite.internal';
const VALUE = 'sk-real-' + crypto.randomBytes(12).toString('hex');

test('Secret has BoxLite shape and hides its value', () => {
  const s = new Secret({ name: 'openai', value: VALUE, hosts: ['api.openai.com'] });
  assert.equal(s.getPlaceholder(), '<BOXLITE_SECRET:openai>');
  assert.equal(s.value, VALUE);
  assert.ok(!JSON.stringify(s).includes(VALUE));
  assert.ok(!require('node:util').inspect(s).includes(VALUE));
  assert.equal(new Secret({ name: 'a', value: 'v', hosts: ['h'], placeholder: 'PH-12345' }).getPlaceholder(), 'PH-12345');
  assert.deepEqual(new Secret({ name: 'a', value: 'v' }).hosts, []);
});

test('bad secrets are refused before anything boots', { skip: missingImage('alpine:latest') }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  t.after(() => runtime.close());
  for (const [secrets, msg] of [
    [[{ name: 'a', value: 'v' }], /hosts/],
    [[{ name: 'a', value: 'x\ny', hosts: ['h'] }], /line break/],
    [[{ name: 'a', value: 'v', hosts: ['h'], bogus: 1 }], /bogus/],
    ['nope', /array/],
  ]) {
    const e = await rejection((async () => new SimpleBox({ image: 'alpine:latest', runtime, secrets }).getInfo())());
    assert.ok(e instanceof BoxliteError || e instanceof TypeError, String(e));
    assert.match(e.message, msg);
  }
});

/** A test CA and a server certificate from it for ALIAS, with openssl. */
function pki(dir) {
  const ossl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe', timeout: 60_000 });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=boxlite test CA', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${ALIAS}`,
    '-keyout', 'srv.key', '-out', 'srv.csr');
  fs.writeFileSync(path.join(dir, 'ext'), `subjectAltName=DNS:${ALIAS}\nextendedKeyUsage=serverAuth\n`);
  ossl('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1',
    '-extfile', 'ext', '-out', 'srv.pem');
  return { ca: path.join(dir, 'ca.pem'), cert: fs.readFileSync(path.join(dir, 'srv.pem')), key: fs.readFileSync(path.join(dir, 'srv.key')) };
}

// The child: a box with the secret; prints what the box saw, as JSON.
const CHILD = `
const { JsBoxlite, SimpleBox, Secret } = require(process.env.PKG);
const [tlsPort, plainPort] = process.argv.slice(-2).map(Number);
const FETCH = [
  'import os, sys, urllib.request',
  'ph = os.environ["BOXLITE_SECRET_API"]',
  'req = urllib.request.Request(sys.argv[1], data=("key=" + ph).encode(), headers={"Authorization": "Bearer " + ph})',
  'print(urllib.request.urlopen(req, timeout=60).read().decode())'].join('\\n');
(async () => {
  const runtime = new JsBoxlite({ homeDir: process.env.HOME_DIR });
  const sec = new Secret({ name: 'api', value: process.env.SECRET_VALUE, hosts: ['host.boxlite.internal:' + tlsPort] });
  delete process.env.SECRET_VALUE;
  const box = new SimpleBox({ image: 'python:slim', memoryMib: 512, runtime, secrets: [sec] });
  const out = { placeholder: sec.getPlaceholder() };
  try {
    out.env = (await box.exec('sh', ['-c', 'echo $BOXLITE_SECRET_API'])).stdout.trim();
    const info = await box.info();
    out.info = info.secrets;
    out.infoJson = JSON.stringify(info);
    for (const [key, url] of [['listed', 'https://host.boxlite.internal:' + tlsPort + '/v1'], ['unlisted', 'http://host.boxlite.internal:' + plainPort + '/']]) {
      const r = await box.exec('python3', ['-c', FETCH, url], undefined, { timeoutSecs: 120 });
      out[key] = [r.exitCode, r.stdout.trim(), r.stderr.slice(-2000)];
    }
  } finally {
    await box.stop();
    await runtime.close();
  }
  console.log('RESULT ' + JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`;

test('a secret reaches the listed host only', { skip: missingImage('python:slim') || localOnly("the box's shim reads SSL_CERT_FILE from this host process's environment"), timeout: 600_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-secrets-'));
  const { ca, cert, key } = pki(dir);
  const got = [];
  const handler = (req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => { got.push(`${req.headers.authorization}|${body}`); res.end('served'); });
  };
  const tls = https.createServer({ cert, key }, handler);
  const plain = http.createServer(handler);
  for (const s of [tls, plain]) await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.after(() => { tls.close(); plain.close(); fs.rmSync(dir, { recursive: true, force: true }); });

  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'python:slim');
  await runtime.close();

  // Asynchronous, so this process's servers answer while the child runs.
  const child = spawn(process.execPath, ['-e', CHILD, '--', String(tls.address().port), String(plain.address().port)], {
    env: { ...process.env, SSL_CERT_FILE: ca, SECRET_VALUE: VALUE, PKG: pkg, HOME_DIR: home },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await new Promise((resolve) => child.on('close', resolve));
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(code === 0 && line, stdout + stderr);
  const out = JSON.parse(line.slice('RESULT '.length));
  const ph = out.placeholder;
  assert.equal(out.env, ph, "the box's environment has the placeholder");
  assert.deepEqual(out.info, [{ name: 'api', hosts: [`${ALIAS}:${tls.address().port}`], placeholder: ph }]);
  assert.ok(!out.infoJson.includes(VALUE));
  assert.deepEqual(out.listed.slice(0, 2), [0, 'served'], out.listed[2]);
  assert.deepEqual(out.unlisted.slice(0, 2), [0, 'served'], out.unlisted[2]);
  assert.deepEqual(got, [`Bearer ${VALUE}|key=${VALUE}`, `Bearer ${ph}|key=${ph}`]);
});
