// Drives `boxlite serve` with BoxLite's own Node package
// (@boxlite-ai/boxlite 0.10.0 from npm, installed by the Go test into a
// node project of its own): JsBoxlite.rest(), SimpleBox exec with
// streamed output, copies in and out, list, get, stop, remove.
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
