// Drives `boxlite serve` with BoxLite's own Node package
// (@boxlite-ai/boxlite 0.10.0 from npm, installed by the Go test into a
// node project of its own): JsBoxlite.rest(), SimpleBox exec with
// streamed output, copies in and out, a tunnel (connect, forward), list,
// get, stop, remove.
// Environment: BOXLITE_REST_URL, BOXLITE_API_KEY, WORK.
import { JsBoxlite, BoxliteRestOptions, ApiKeyCredential, SimpleBox } from '@boxlite-ai/boxlite';
import fs from 'node:fs';
import path from 'node:path';

function check(cond, what) {
  if (!cond) throw new Error('FAILED: ' + what);
  console.log('ok:', what);
}

const work = process.env.WORK;
const rt = JsBoxlite.rest(new BoxliteRestOptions({
  url: process.env.BOXLITE_REST_URL,
  credential: new ApiKeyCredential(process.env.BOXLITE_API_KEY),
}));

const box = new SimpleBox({ image: 'alpine:latest', memoryMib: 256, runtime: rt, name: 'node-simple' });
try {
  let r = await box.exec('sh', '-c', 'echo hello; echo oops >&2; exit 3');
  check(r.exitCode === 3, `exit code 3 (got ${r.exitCode})`);
  check(r.stdout === 'hello\n', `stdout (got ${JSON.stringify(r.stdout)})`);
  check(r.stderr === 'oops\n', `stderr (got ${JSON.stringify(r.stderr)})`);

  fs.mkdirSync(path.join(work, 'src', 'sub'), { recursive: true });
  fs.writeFileSync(path.join(work, 'src', 'sub', 'b.txt'), 'beta\n');
  fs.writeFileSync(path.join(work, 'a.txt'), 'alpha\n');
  await box.copyIn(path.join(work, 'a.txt'), '/root/a.txt');
  r = await box.exec('cat', '/root/a.txt');
  check(r.stdout === 'alpha\n', `copyIn of a file (got ${JSON.stringify(r.stdout)})`);
  await box.copyIn(path.join(work, 'src'), '/srv/in');
  r = await box.exec('sh', '-c', 'cat $(find /srv/in -name b.txt)');
  check(r.stdout === 'beta\n', 'copyIn of a directory');
  await box.exec('sh', '-c', 'mkdir -p /out/d && echo gamma > /out/d/c.txt');
  const dst = path.join(work, 'out');
  await box.copyOut('/out/d', dst);
  const found = fs.readdirSync(dst, { recursive: true }).map(String);
  console.log('tree on host:', found);
  check(found.some((p) => p.endsWith('c.txt')), 'copyOut of a directory');

  // A tunnel through the server's CONNECT listener: connect() with a
  // half-close, forward() to a host port a plain HTTP client reaches.
  await box.exec('sh', '-c', 'mkdir -p /w && echo node-tunnel > /w/index.html && (httpd -f -p 127.0.0.1:8000 -h /w </dev/null >/dev/null 2>&1 &)');
  // Wait in the box until httpd listens (port 8000 is 1F40, LISTEN is 0A):
  // a refused CONNECT can surface from the Node client as an exception no
  // try catches, so the first tunnel must find the server up.
  const up = await box.exec('sh', '-c', 'i=0; until grep -q ":1F40 00000000:0000 0A" /proc/net/tcp; do i=$((i+1)); [ $i -gt 300 ] && exit 1; sleep 0.1; done');
  check(up.exitCode === 0, `httpd listens in the box (exit ${up.exitCode})`);
  let answer = '';
  for (let i = 0; i < 50 && !answer.endsWith('node-tunnel\n'); i++) {
    const tunnel = await box.network.tunnel(8000);
    check(typeof tunnel.uri() === 'string' && tunnel.uri().includes('@'), 'a REST tunnel has a uri');
    try {
      const conn = await tunnel.connect();
      await conn.write(Buffer.from('GET /index.html HTTP/1.0\r\n\r\n'));
      await conn.shutdownWrite();
      answer = '';
      for (;;) {
        const b = await conn.read(4096);
        if (!b || b.length === 0) break;
        answer += b.toString();
      }
      await conn.close();
    } catch (e) {
      console.log('tunnel not ready:', String(e).slice(0, 120));
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  check(answer.endsWith('node-tunnel\n'), `tunnel connect(): the box's answer (got ${JSON.stringify(answer.slice(-40))})`);
  const fw = await (await box.network.tunnel(8000)).forward({ type: 'tcp', host: '127.0.0.1', port: 0 });
  const la = fw.localAddr();
  const page = await (await fetch(`http://127.0.0.1:${la.port}/index.html`)).text();
  await fw.close();
  check(page === 'node-tunnel\n', `tunnel forward(): fetch through it (got ${JSON.stringify(page)})`);

  const infos = await rt.listInfo();
  check(infos.some((i) => i.name === 'node-simple'), 'listInfo shows the box');
  const info = await rt.getInfo('node-simple');
  check(info && info.state.status === 'running', `getInfo: running (got ${info && info.state.status})`);
} finally {
  await box.stop();
}
const after = await rt.getInfo('node-simple');
check(after === null || after.state.status === 'stopped', `stopped or removed (got ${after && after.state.status})`);
if (after) await rt.remove('node-simple', true);
check((await rt.get('node-simple')) === null, 'removed');
console.log('ALL OK');
