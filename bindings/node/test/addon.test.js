'use strict';
// The addon's structure (src/): every function of include/boxlite.h has a
// row in the table of src/calls.c, the raw layer exports exactly the table
// (and the poller's two functions), nothing bench-only ships, and no source
// file of the package outgrows one concern. No box is booted.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const raw = require('../lib/raw');
const { pkg } = require('./helpers');

const src = (f) => fs.readFileSync(path.join(pkg, 'src', f), 'utf8');

function header() {
  for (const p of [path.join(pkg, '..', '..', 'include', 'boxlite.h'), path.join(pkg, 'native', 'include', 'boxlite.h')]) {
    if (fs.existsSync(p)) return fs.readFileSync(p, 'utf8');
  }
  throw new Error('include/boxlite.h not found (neither in the repository nor in native/include)');
}

/** The table's rows: {js, call} with the C functions each row calls. */
function rows() {
  const c = src('calls.c');
  const table = c.slice(c.indexOf('#define CALLS(X)'), c.indexOf('/* clang-format on */'));
  const out = [];
  for (const part of table.split(/\bX\(/).slice(1)) {
    out.push({ js: /^(\w+)/.exec(part)[1], calls: [...part.matchAll(/\b(boxlite_\w+)\b/g)].map((m) => m[1]) });
  }
  return out;
}

// Called by engine.c on what a call handed out, never from JS.
const INTERNAL = ['boxlite_error_free', 'boxlite_string_free', 'boxlite_result_free'];

test('every function of include/boxlite.h is called by a row of the table', () => {
  const declared = [...header().matchAll(/^[a-z][\w ]*?\**\s*\b(boxlite_\w+)\(/gm)].map((m) => m[1]);
  assert.ok(declared.length > 40, `parsed only ${declared.length} functions of the header`);
  const called = new Set(rows().flatMap((r) => r.calls));
  const missing = declared.filter((f) => !called.has(f) && !INTERNAL.includes(f));
  assert.deepEqual(missing, [], 'header functions without a row in src/calls.c');
  for (const f of INTERNAL) assert.match(src('engine.c'), new RegExp(`\\b${f}\\(`), `engine.c frees with ${f}`);
});

test('the raw layer exports the table, the two fd watches and the header constants; nothing bench-only', () => {
  const fns = Object.keys(raw).filter((k) => typeof raw[k] === 'function').sort();
  const want = rows().map((r) => r.js).concat(['executionWatchFd', 'cellWatchFd']).sort();
  assert.deepEqual(fns, want);
  assert.ok(!fns.some((f) => /bench/i.test(f)), 'a bench-only export ships');
  assert.equal(typeof raw.ERR_NOT_FOUND, 'number');
  assert.equal(typeof raw.VERSION_STRING, 'string');
});

test('no C or JS source file of the package is over 600 lines', () => {
  const long = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (['node_modules', 'native'].includes(e.name)) continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(c|h|js|mjs)$/.test(e.name)) {
        const n = fs.readFileSync(p, 'utf8').split('\n').length;
        if (n > 600) long.push(`${path.relative(pkg, p)}: ${n} lines`);
      }
    }
  };
  walk(pkg);
  assert.deepEqual(long, []);
});
