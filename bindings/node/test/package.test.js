'use strict';
// The package installs from another project (`npm install /path/to/bindings/node`,
// also under BoxLite's package name) and loads as CommonJS and as an ES module.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { pkg } = require('./helpers');

test('npm install from another project, CommonJS and ESM, both package names', { timeout: 120_000 }, () => {
  const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'boxlite-pkg-'));
  try {
    fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'p', private: true }));
    const npm = (...args) => execFileSync('npm', ['--no-audit', '--no-fund', '--prefer-offline', ...args], { cwd: proj, stdio: 'pipe' });
    npm('install', pkg);
    npm('install', `@boxlite-ai/boxlite@file:${pkg}`);
    const node = (args) => execFileSync(process.execPath, args, { cwd: proj, encoding: 'utf8' });
    const names = ['SimpleBox', 'CodeBox', 'InteractiveBox', 'JsBoxlite', 'Boxlite', 'ExecError', 'TimeoutError', 'BoxliteError', 'ParseError'];
    for (const name of ['boxlite-go', '@boxlite-ai/boxlite']) {
      const cjs = node(['-e', `const b = require('${name}'); console.log(${JSON.stringify(names)}.filter((n) => typeof b[n] !== 'function').join(',') + '|' + b.version())`]);
      assert.equal(cjs.trim(), '|0.1.0');
      const esm = node(['--input-type=module', '-e', `import { ${names.join(', ')}, version } from '${name}'; console.log([${names.join(', ')}].every((f) => typeof f === 'function'), version())`]);
      assert.equal(esm.trim(), 'true 0.1.0');
    }
    const raw = node(['-e', "const r = require('boxlite-go/raw'); console.log(r.statusName(r.ERR_CLOSED))"]);
    assert.equal(raw.trim(), 'closed');
  } finally {
    fs.rmSync(proj, { recursive: true, force: true });
  }
});

test('the installed package is self-contained: the addon finds libboxlite.so by its rpath, the library its assets beside it', () => {
  const native = path.join(pkg, 'native');
  for (const f of ['boxlite.node', 'libboxlite.so', 'boxlite-shim', 'boxlite-net', 'virtiofsd', 'guest/vmlinuz', 'guest/initramfs.cpio']) {
    assert.ok(fs.existsSync(path.join(native, f)), f);
  }
  const dyn = execFileSync('readelf', ['-d', path.join(native, 'boxlite.node')], { encoding: 'utf8' });
  assert.match(dyn, /NEEDED.*libboxlite\.so/);
  assert.match(dyn, /(RUNPATH|RPATH).*\$ORIGIN/);
});
