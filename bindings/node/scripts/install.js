#!/usr/bin/env node
// npm's install script. The package needs native/: libboxlite.so, boxlite-shim, boxlite-net,
// virtiofsd, guest/{vmlinuz,initramfs.cpio} and the addon boxlite.node, which links
// libboxlite.so with an rpath of $ORIGIN (the library finds the shim and guest beside itself,
// so the installed package is self-contained).
//
// What it does, first match wins:
//   $BOXLITE_BUILD_DIR set         copy that Go build (make build) into native/, compile the addon
//   native/PREBUILT, addon loads   nothing: the released package (make dist) carries a prebuilt
//                                  addon for linux-x64 glibc; no compiler is needed
//   ../../build complete           this package inside the boxlite repository: copy, compile
//   native/ has the assets         compile the addon only (the prebuilt one did not load)
// Compiling uses plain gcc ($CC) against the N-API headers in src/napi/: no node-gyp, nothing
// downloaded. Without a compiler it stops saying which one it needs.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const pkg = path.resolve(__dirname, '..');
const native = path.join(pkg, 'native');
const name = require(path.join(pkg, 'package.json')).name;
const ASSETS = ['libboxlite.so', 'boxlite-shim', 'boxlite-net', 'virtiofsd', 'guest/vmlinuz', 'guest/initramfs.cpio'];
const BUILD_HINT = 'Build them in the boxlite repository first:\n  make build';

function fail(msg) {
  process.stderr.write(`\n${name}: ${msg}\n\n`);
  process.exit(1);
}

function missingIn(dir) {
  return ASSETS.filter((a) => !fs.existsSync(path.join(dir, a)));
}

function copy(src, dst) {
  fs.mkdirSync(path.dirname(dst), { recursive: true });
  const tmp = `${dst}.tmp${process.pid}`;
  fs.copyFileSync(src, tmp);
  fs.chmodSync(tmp, fs.statSync(src).mode & 0o777);
  fs.renameSync(tmp, dst); // a running process keeps its old copy
}

// Why the prebuilt addon cannot be used here, or null when it loads.
function prebuiltProblem() {
  const addon = path.join(native, 'boxlite.node');
  if (!fs.existsSync(path.join(native, 'PREBUILT')) || !fs.existsSync(addon)) return 'no prebuilt addon in this package';
  const missing = missingIn(native);
  if (missing.length) return `the package lacks ${missing.join(', ')}`;
  try {
    // In a child: loading starts the library's runtime, which this script need not keep.
    execFileSync(process.execPath, ['-e', `require(${JSON.stringify(addon)})`], { stdio: 'pipe' });
    return null;
  } catch (e) {
    return `the prebuilt addon (${fs.readFileSync(path.join(native, 'PREBUILT'), 'utf8').trim()}) does not load here: ` +
      (String(e.stderr || e.message).split('\n').find((l) => /Error|error/.test(l)) || 'unknown error');
  }
}

function findHeader(build) {
  const candidates = [];
  if (process.env.BOXLITE_INCLUDE_DIR) candidates.push(path.join(process.env.BOXLITE_INCLUDE_DIR, 'boxlite.h'));
  if (build) candidates.push(path.join(build, '..', 'include', 'boxlite.h'), path.join(build, 'include', 'boxlite.h'));
  candidates.push(path.join(pkg, '..', '..', 'include', 'boxlite.h'));
  return candidates.find((c) => fs.existsSync(c));
}

function compile(build, why) {
  const header = findHeader(build);
  if (header) copy(header, path.join(native, 'include', 'boxlite.h'));
  else if (!fs.existsSync(path.join(native, 'include', 'boxlite.h'))) {
    fail('cannot find include/boxlite.h (set BOXLITE_INCLUDE_DIR to the directory that has it).');
  }
  const cc = process.env.CC || 'gcc';
  try {
    execFileSync(cc, ['--version'], { stdio: 'ignore' });
  } catch {
    fail(`${why ? `${why}, so ` : ''}the addon must be compiled here, which needs a C compiler: ` +
      `\`${cc}\` was not found.\nInstall gcc (Debian/Ubuntu: apt-get install gcc) or set CC to a C compiler, ` +
      'then run npm install again.');
  }
  const srcDir = path.join(pkg, 'src');
  const sources = fs.readdirSync(srcDir).filter((f) => f.endsWith('.c')).sort().map((f) => path.join(srcDir, f));
  const out = path.join(native, 'boxlite.node');
  const tmp = `${out}.tmp${process.pid}`;
  const args = [
    '-shared', '-fPIC', '-O2', '-g', '-std=gnu11', '-Wall', '-Wextra', '-Wno-unused-parameter',
    '-fvisibility=hidden',
    '-I', path.join(srcDir, 'napi'), '-I', path.join(native, 'include'),
    ...sources,
    '-L', native, '-lboxlite', '-lpthread',
    '-Wl,-rpath,$ORIGIN', '-Wl,--as-needed',
    '-o', tmp,
  ];
  try {
    execFileSync(cc, args, { stdio: 'inherit' });
  } catch (e) {
    fail(`compiling src/*.c failed (${cc} ${args.join(' ')})`);
  }
  fs.renameSync(tmp, out);
  fs.rmSync(path.join(native, 'PREBUILT'), { force: true }); // this addon was built here
  process.stdout.write(`${name}: built ${path.relative(process.cwd(), out) || out}` +
    (build ? ` with the library and assets of ${build}\n` : ' with the packaged library\n'));
}

function fromBuild(dir) {
  for (const a of ASSETS) copy(path.join(dir, a), path.join(native, a));
  compile(dir, '');
}

function main() {
  if (process.platform !== 'linux') fail(`boxlite runs on Linux only (this is ${process.platform}).`);
  if (process.env.BOXLITE_BUILD_DIR) {
    const dir = path.resolve(process.env.BOXLITE_BUILD_DIR);
    const missing = missingIn(dir);
    if (missing.length) fail(`BOXLITE_BUILD_DIR=${dir} lacks ${missing.join(', ')}.\n${BUILD_HINT}`);
    return fromBuild(dir);
  }
  const why = prebuiltProblem();
  if (why === null) {
    process.stdout.write(`${name}: using the prebuilt addon (${fs.readFileSync(path.join(native, 'PREBUILT'), 'utf8').trim()})\n`);
    return;
  }
  const repoBuild = path.resolve(pkg, '..', '..', 'build');
  if (missingIn(repoBuild).length === 0) return fromBuild(repoBuild);
  const missing = missingIn(native);
  if (missing.length === 0) {
    if (process.arch !== 'x64') fail(`this package carries native parts for linux-x64 only (this is ${process.arch}); build boxlite from source.`);
    return compile(null, why);
  }
  fail(`cannot find the boxlite build (${ASSETS.join(', ')}) in ${repoBuild}.\n${BUILD_HINT}\n` +
    'or point BOXLITE_BUILD_DIR at a directory that has them.');
}

main();
