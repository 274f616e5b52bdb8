'use strict';
// InteractiveBox({tty: true}) used as a person would: a small program that
// hands its terminal to the box's shell, run inside tmux, typed at with
// send-keys and read with capture-pane. One box boot.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { pkg, home, images, missingImage } = require('./helpers');

const skip = missingImage('alpine:latest');

const PROGRAM = `
const { JsBoxlite, InteractiveBox } = require(${JSON.stringify(pkg)});
(async () => {
  const runtime = new JsBoxlite({ homeDir: ${JSON.stringify(home)} });
  if (!(await runtime.listImages()).some((i) => /alpine:latest$/.test(i.name))) await runtime.loadImage(${JSON.stringify(images['alpine:latest'])});
  const box = new InteractiveBox({ runtime, image: 'alpine:latest', memoryMib: 256, tty: true });
  try {
    await box.start();
    const x = await box.wait();
    console.log('PROGRAM-DONE exit=' + x.exitCode + ' raw=' + process.stdin.isRaw);
  } finally {
    await box.stop();
    await runtime.close();
  }
})();
`;

function tmux() {
  const r = spawnSync('sh', ['-c', 'command -v tmux'], { encoding: 'utf8' });
  // make setup installs it (the Makefile's APT_PKGS); a test installs nothing
  assert.equal(r.status, 0, 'tmux is not installed: run `make setup`');
  return r.stdout.trim();
}

test('InteractiveBox({tty: true}) hands the terminal to the box shell', { skip, timeout: 240_000 }, async () => {
  const bin = tmux();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-tty-'));
  const sock = path.join(dir, 'tmux.sock');
  const prog = path.join(dir, 'prog.js');
  fs.writeFileSync(prog, PROGRAM);
  const env = { ...process.env, TERM: 'xterm', BOXLITE_ASSETS: '' };
  const t = (...args) => spawnSync(bin, ['-S', sock, ...args], { env, encoding: 'utf8' });
  const screen = () => t('capture-pane', '-p', '-t', 'bx').stdout;
  const waitScreen = async (rx, within) => {
    let shown = '';
    for (const deadline = Date.now() + within; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      shown = screen();
      if (rx.test(shown)) return shown;
    }
    assert.fail(`the screen never showed ${rx}:\n${shown}`);
  };
  const script = `${process.execPath} ${prog}; echo program-rc=$?; sleep 600`;
  const r = t('new-session', '-d', '-s', 'bx', '-x', '100', '-y', '30', 'sh', '-c', script);
  assert.equal(r.status, 0, r.stderr);
  try {
    await waitScreen(/^\/ #\s*$/m, 150_000); // booted; the shell prompts
    t('send-keys', '-t', 'bx', 'echo hi-from-tty', 'Enter');
    await waitScreen(/^hi-from-tty\s*$/m, 30_000);
    t('send-keys', '-t', 'bx', 'clear; stty size', 'Enter');
    await waitScreen(/^30 100\s*$/m, 30_000);
    t('resize-window', '-t', 'bx', '-x', '120', '-y', '40');
    t('send-keys', '-t', 'bx', 'clear; stty size', 'Enter');
    await waitScreen(/^40 120\s*$/m, 30_000);
    t('send-keys', '-t', 'bx', 'exit 3', 'Enter');
    const shown = await waitScreen(/^program-rc=\d+/m, 60_000);
    assert.match(shown, /^PROGRAM-DONE exit=3 raw=false\s*$/m, 'the exit code, and the terminal out of raw mode');
    assert.match(shown, /^program-rc=0\s*$/m);
  } finally {
    t('kill-server'); // our own server, on our own socket
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('InteractiveBox({tty: true}) with stdin at its end (</dev/null) ends the shell', { skip, timeout: 240_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-tty-'));
  try {
    const prog = path.join(dir, 'prog.js');
    fs.writeFileSync(prog, PROGRAM);
    const r = spawnSync(process.execPath, [prog], {
      stdio: [fs.openSync('/dev/null', 'r'), 'pipe', 'pipe'], encoding: 'utf8', timeout: 180_000,
      env: { ...process.env, BOXLITE_ASSETS: '' },
    });
    assert.equal(r.status, 0, `${r.error || ''} ${r.stderr}`);
    assert.match(r.stdout, /PROGRAM-DONE exit=0/, 'the ^D the end of input types reaches the shell');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
