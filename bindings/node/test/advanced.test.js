'use strict';
// BoxLite 0.10's advanced options: the presets and defaults as BoxLite's,
// bad options refused before anything boots (naming what is wrong, at every
// depth), and a program written as a BoxLite 0.10 user writes it
// (capabilities under advanced, security and healthCheck at the top of the
// box options) run in a child node against a real alpine box.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, SimpleBox, SecurityOptions, HEALTH_CHECK_DEFAULTS, BoxliteError } = require('..');
const { pkg, home, ensureImage, missingImage, rejection } = require('./helpers');

test('presets and defaults are BoxLite\'s', () => {
  assert.deepEqual(HEALTH_CHECK_DEFAULTS, { interval: 30, timeout: 10, retries: 3, startPeriod: 60 });
  assert.equal(SecurityOptions.development().jailerEnabled, false);
  assert.equal(SecurityOptions.standard().seccompEnabled, true);
  const m = SecurityOptions.maximum();
  assert.deepEqual([m.maxOpenFiles, m.maxFileSize, m.maxProcesses, m.maxMemory], [1024, 1 << 30, 100, undefined]);
});

test('bad advanced options are refused before anything boots', { skip: missingImage('alpine:latest') }, async (t) => {
  const runtime = new JsBoxlite({ homeDir: home });
  t.after(() => runtime.close());
  for (const [opts, msg] of [
    [{ advanced: { capabilities: { add: ['NET_ADMN'] } } }, /NET_ADMN/],
    [{ advanced: { capabilities: { add: ['NET_ADMIN'], remove: ['CHOWN'] } } }, /advanced\.capabilities\.remove/],
    [{ advanced: { bogus: 1 } }, /advanced\.bogus/],
    [{ security: { jailerEnabled: true, seccompEnabld: false } }, /security\.seccompEnabld/],
    [{ security: { maxOpenFiles: -1 } }, /maxOpenFiles/],
    [{ security: { networkEnabled: false } }, /network_enabled/],
    [{ healthCheck: { interval: 1, retries: 0 } }, /retries/],
    [{ healthCheck: { interval: 1, startPeriod: 0, every: 2 } }, /healthCheck\.every/],
    [{ security: {}, advanced: { security: {} } }, /security once/],
  ]) {
    const e = await rejection((async () => new SimpleBox({ image: 'alpine:latest', runtime, ...opts }).getInfo())());
    assert.ok(e instanceof BoxliteError || e instanceof TypeError || e instanceof RangeError, String(e));
    assert.match(e.message, msg);
  }
});

// Written as BoxLite 0.10's Node docs write it.
const PROGRAM = `
const { SimpleBox } = require(process.argv[2]);
(async () => {
  const box = new SimpleBox({
    image: 'alpine:latest',
    advanced: { capabilities: { add: ['SYS_ADMIN'], drop: ['KILL'] } },
    security: { jailerEnabled: true, seccompEnabled: true, maxOpenFiles: 222 },
    healthCheck: { interval: 1, timeout: 5, retries: 2, startPeriod: 0 },
  });
  try {
    const r = await box.exec('sh', '-c', "grep -E '^(CapBnd|Seccomp):' /proc/self/status; ulimit -n");
    console.log(r.stdout.trim());
    let info;
    for (let i = 0; i < 200; i++) {
      info = await box.getInfo();
      if (info.healthStatus.state === 'Healthy') break;
      await new Promise((res) => setTimeout(res, 100));
    }
    console.log('health', info.healthStatus.state, info.healthStatus.failures, info.advanced.security.maxOpenFiles);
    const m = await box.metrics(); // BoxLite 0.10's fields
    console.log('stages', m.stageFilesystemSetupMs >= 0, m.stageGuestRootfsMs >= 0, m.networkTcpErrors);
  } finally {
    await box.stop();
  }
})().catch((e) => { console.error(e); process.exit(1); });
`;

test('a BoxLite 0.10 program with advanced options', { skip: missingImage('alpine:latest') }, async () => {
  const runtime = new JsBoxlite({ homeDir: home });
  await ensureImage(runtime, 'alpine:latest');
  await runtime.close();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'adv-'));
  const prog = path.join(dir, 'advanced.js');
  fs.writeFileSync(prog, PROGRAM);
  const out = execFileSync(process.execPath, [prog, pkg], { env: { ...process.env, BOXLITE_HOME: home }, timeout: 600_000 }).toString();
  const lines = out.split('\n');
  const want = ((((0xa80425fb & ~(1 << 27)) | (1 << 21)) & ~(1 << 5)) >>> 0); // docker's without MKNOD, + SYS_ADMIN, - KILL
  assert.ok(lines.includes(`CapBnd:\t${want.toString(16).padStart(16, '0')}`), out);
  assert.ok(lines.includes('Seccomp:\t2'), out);
  assert.ok(lines.includes('222'), out);
  assert.ok(lines.includes('health Healthy 0 222'), out);
  assert.ok(lines.includes('stages true true 0'), out); // networkTcpErrors: no connection failed
});
