'use strict';
// lib/index.d.ts agrees with the code: every name it exports is exported,
// every method it declares on a class exists there (prototype or static),
// and test/types/usage.ts (BoxLite programs' uses) type-checks against it.
// No box is booted.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const boxlite = require('..');

const dts = fs.readFileSync(path.join(__dirname, '..', 'lib', 'index.d.ts'), 'utf8');

function declaredClasses() {
  const classes = {};
  const rx = /^export declare class (\w+)[^{]*\{\n([\s\S]*?)^\}/gm;
  for (let m; (m = rx.exec(dts)); ) {
    const methods = new Set();
    for (const line of m[2].split('\n')) {
      const mm = /^ {2}(static )?(?:get |async )?(\w+)\s*\(/.exec(line);
      if (mm && mm[2] !== 'constructor') methods.add((mm[1] ? 'static ' : '') + mm[2]);
    }
    classes[m[1]] = methods;
  }
  return classes;
}

test('every exported name of index.d.ts is exported by the package', () => {
  const names = new Set();
  for (const m of dts.matchAll(/^export declare (?:class|function|const) (\w+)/gm)) names.add(m[1]);
  for (const m of dts.matchAll(/^export \{ (\w+) as (\w+) \};/gm)) names.add(m[2]);
  assert.ok(names.size > 10, `parsed only ${names.size} names`);
  const missing = [...names].filter((n) => !(n in boxlite));
  assert.deepEqual(missing, []);
});

test('every method index.d.ts declares exists on its class', () => {
  const classes = declaredClasses();
  assert.ok(Object.keys(classes).length > 8, 'parsed too few classes');
  const missing = [];
  for (const [name, methods] of Object.entries(classes)) {
    const cls = boxlite[name];
    if (typeof cls !== 'function') continue; // reported by the test above
    for (const m of methods) {
      const ok = m.startsWith('static ') ? typeof cls[m.slice(7)] === 'function' : m in cls.prototype;
      if (!ok) missing.push(`${name}.${m}`);
    }
  }
  assert.deepEqual(missing, []);
});

test('BoxLite-style usage type-checks against index.d.ts (tsc --noEmit)', { timeout: 120_000 }, () => {
  const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');
  assert.ok(fs.existsSync(tsc), 'typescript is a devDependency: run `npm install` (make node) first');
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types')], { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc found errors:\n${e.stdout}${e.stderr}`);
  }
});
