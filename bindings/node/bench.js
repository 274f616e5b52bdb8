#!/usr/bin/env node
'use strict';
// bench.js: what the Node layers add to an exec round trip, next to the C
// ABI's own, measured in the same process on the same box.
//
//   C ABI          boxlite_box_run timed in C around the call, back to back,
//                  by bench/baseline.c (a C program attached to the same box
//                  by id; compiled here, not part of the package): the baseline
//   raw boxRun     the same call as a Promise from JS (adds the libuv pool hop)
//   Box.exec       exec + streams + wait through the friendly layer's Execution
//   SimpleBox.exec BoxLite's API: the same plus argument parsing and collection
//
// Rounds interleave the variants so drift (TCG, other load) hits them alike.
// Usage: node bench.js [iterations per variant, default 200]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const raw = require('./lib/raw');
const { JsBoxlite, SimpleBox } = require('./lib');

const N = Number(process.argv[2] || 200);
const ROUNDS = 10;
const build = path.resolve(process.env.BOXLITE_BUILD_DIR || path.join(__dirname, '..', '..', 'build'));
const image = process.env.BOXLITE_TEST_IMAGE || path.join(build, 'images', 'alpine.tar');
const home = process.env.BOXLITE_HOME || path.join(os.tmpdir(), 'boxlite-node-test-home');

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const ms = (x) => `${x.toFixed(3)} ms`;

/** Compiles bench/baseline.c against the package's libboxlite.so; returns its path. */
function buildBaseline() {
  const native = path.join(__dirname, 'native');
  const include = [path.join(__dirname, '..', '..', 'include'), path.join(native, 'include')].find((d) => fs.existsSync(path.join(d, 'boxlite.h')));
  if (!include) throw new Error('include/boxlite.h not found (npm install copies it to native/include)');
  const exe = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-bench-')), 'baseline');
  execFileSync(process.env.CC || 'gcc', ['-O2', '-o', exe, path.join(__dirname, 'bench', 'baseline.c'), '-I', include,
    '-L', native, '-lboxlite', `-Wl,-rpath,${native}`], { stdio: 'inherit' });
  return exe;
}

/** n runs of the C baseline on the box: each call's ms. */
function baseline(exe, boxId, n) {
  const out = execFileSync(exe, [home, boxId, String(n)], { encoding: 'utf8', timeout: 600_000 });
  return out.split('\n').filter(Boolean).map((ns) => Number(ns) / 1e6);
}

async function timed(fn, n, into) {
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn();
    into.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
}

async function main() {
  if (!fs.existsSync(image)) throw new Error(`no test image at ${image} (make images)`);
  const runtime = new JsBoxlite({ homeDir: home });
  if (!(await runtime.listImages()).some((i) => i.name.endsWith('alpine:latest'))) await runtime.loadImage(image);
  const sb = new SimpleBox({ runtime, image: 'alpine:latest', memoryMib: 256 });
  const t0 = Date.now();
  await sb.exec('true');
  const box = await sb.getBox();
  const info = await box.info();
  console.log(`box ${box.id} up in ${Date.now() - t0} ms (accel ${info.runtime.accel}); node ${process.version}, libboxlite ${raw.version()}`);
  const cmd = JSON.stringify({ argv: ['true'] });
  const exe = buildBaseline();

  // warm up every path
  baseline(exe, box.id, 20);
  for (let i = 0; i < 20; i++) {
    await raw.boxRun(box._h, cmd);
    await sb.exec('true');
  }

  const r = { c: [], rawRun: [], boxExec: [], simple: [] };
  const per = Math.max(1, Math.round(N / ROUNDS));
  for (let round = 0; round < ROUNDS; round++) {
    r.c.push(...baseline(exe, box.id, per));
    await timed(() => raw.boxRun(box._h, cmd), per, r.rawRun);
    await timed(async () => {
      const ex = await box.exec({ argv: ['true'], stdin: false });
      await Promise.all([ex.stdout.readAll(), ex.stderr.readAll()]);
      await ex.wait();
    }, per, r.boxExec);
    await timed(() => sb.exec('true'), per, r.simple);
  }

  const base = q(r.c, 0.5);
  console.log(`\nexec round trip of \`true\`, ${r.c.length} runs each (p50 / p90 / p99 / mean; overhead = p50 - C ABI p50)`);
  for (const [name, xs] of [['C ABI boxlite_box_run', r.c], ['raw boxRun (Promise)', r.rawRun], ['Box.exec + streams', r.boxExec], ['SimpleBox.exec', r.simple]]) {
    const p50 = q(xs, 0.5);
    const over = xs === r.c ? '' : `   overhead ${ms(p50 - base)} (${(((p50 - base) / base) * 100).toFixed(1)}%)`;
    console.log(`  ${name.padEnd(24)} ${ms(p50)} / ${ms(q(xs, 0.9))} / ${ms(q(xs, 0.99))} / ${ms(mean(xs))}${over}`);
  }

  // throughput: one large output, collected by the C ABI vs streamed by the iterator
  const big = ['dd', 'if=/dev/zero', 'bs=65536', 'count=1024']; // busybox head is slow under TCG
  let t = process.hrtime.bigint();
  const res = await raw.boxRun(box._h, JSON.stringify({ argv: big }));
  const cMs = Number(process.hrtime.bigint() - t) / 1e6;
  t = process.hrtime.bigint();
  const ex = await box.exec(big[0], big.slice(1));
  let n = 0;
  ex.stderr.readAll(); // dd's summary
  for await (const b of ex.stdout.buffers()) n += b.length;
  await ex.wait();
  const jsMs = Number(process.hrtime.bigint() - t) / 1e6;
  const mb = (bytes, m) => ((bytes / (1 << 20)) / (m / 1000)).toFixed(1);
  console.log(`\n64 MiB of stdout: C ABI boxRun ${mb(res.stdout.length, cMs)} MiB/s, Node async iterator ${mb(n, jsMs)} MiB/s`);

  // concurrency: 16 execs of `sleep 1` at once
  t = process.hrtime.bigint();
  await Promise.all(Array.from({ length: 16 }, () => sb.exec('sleep', '1')));
  console.log(`16 concurrent \`sleep 1\` via SimpleBox.exec: ${ms(Number(process.hrtime.bigint() - t) / 1e6)} wall`);

  await sb.stop();
  await runtime.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
