#!/usr/bin/env node
// npm's install script: copies libboxlite.so, boxlite-shim, boxlite-net, virtiofsd and guest/ from the
// Go build into native/, then compiles src/*.c into native/boxlite.node
// with plain gcc against node-api-headers (no node-gyp, no header download).
// The addon links libboxlite.so with an rpath of $ORIGIN, and libboxlite.so
// finds boxlite-shim and guest/ beside itself, so the installed package is
// self-contained.
//
// Where the build comes from, first match wins:
//   $BOXLITE_BUILD_DIR             the Go build directory (make build)
//   ../../build                    this package inside the boxlite repository
//   native/ already populated      a packed copy of a package installed before
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const pkg = path.resolve(__dirname, '..');
const native = path.join(pkg, 'native');
const ASSETS = ['libboxlite.so', 'boxlite-shim', 'boxlite-net', 'virtiofsd', 'guest/vmlinuz', 'guest/initramfs.cpio'];

function fail(msg) {
  process.stderr.write(`\nboxlite: ${msg}\n\n`);
  process.exit(1);
}

function complete(dir) {
  return ASSETS.every((a) => fs.existsSync(path.join(dir, a)));
}

function findBuild() {
  if (process.env.BOXLITE_BUILD_DIR) {
    const dir = path.resolve(process.env.BOXLITE_BUILD_DIR);
    if (!complete(dir)) {
      const missing = ASSETS.filter((a) => !fs.existsSync(path.join(dir, a)));
      fail(`BOXLITE_BUILD_DIR=${dir} lacks ${missing.join(', ')}.\n` +
        `Build them in the boxlite repository first:\n` +
        `  make build && go build -buildmode=c-shared -o build/libboxlite.so ./capi`);
    }
    return dir;
  }
  const dir = path.resolve(pkg, '..', '..', 'build');
  if (complete(dir)) return dir;
  if (complete(native)) return null; // a packed package that carries its assets
  fail(`cannot find the boxlite build (libboxlite.so, boxlite-shim, guest/) in ${dir}.\n` +
    `Build them in the boxlite repository first:\n` +
    `  make build && go build -buildmode=c-shared -o build/libboxlite.so ./capi\n` +
    `or point BOXLITE_BUILD_DIR at a directory that has them.`);
}

function copy(src, dst) {
  fs.mkdirSync(path.dirname(dst), { recursive: true });
  const tmp = `${dst}.tmp${process.pid}`;
  fs.copyFileSync(src, tmp);
  fs.chmodSync(tmp, fs.statSync(src).mode & 0o777);
  fs.renameSync(tmp, dst); // a running process keeps its old copy
}

function findHeader(build) {
  const candidates = [];
  if (process.env.BOXLITE_INCLUDE_DIR) candidates.push(path.join(process.env.BOXLITE_INCLUDE_DIR, 'boxlite.h'));
  if (build) candidates.push(path.join(build, '..', 'include', 'boxlite.h'), path.join(build, 'include', 'boxlite.h'));
  candidates.push(path.join(pkg, '..', '..', 'include', 'boxlite.h'));
  return candidates.find((c) => fs.existsSync(c));
}

function main() {
  if (process.platform !== 'linux') fail(`boxlite runs on Linux only (this is ${process.platform}).`);
  const build = findBuild();
  if (build) {
    for (const a of ASSETS) copy(path.join(build, a), path.join(native, a));
  }
  const header = findHeader(build);
  if (header) copy(header, path.join(native, 'include', 'boxlite.h'));
  else if (!fs.existsSync(path.join(native, 'include', 'boxlite.h'))) {
    fail('cannot find include/boxlite.h (set BOXLITE_INCLUDE_DIR to the directory that has it).');
  }

  let napiInclude;
  try {
    napiInclude = require('node-api-headers').include_dir;
  } catch {
    fail('the node-api-headers package is missing (it is a dependency: run npm install).');
  }
  const cc = process.env.CC || 'gcc';
  const srcDir = path.join(pkg, 'src');
  const sources = fs.readdirSync(srcDir).filter((f) => f.endsWith('.c')).sort().map((f) => path.join(srcDir, f));
  const out = path.join(native, 'boxlite.node');
  const tmp = `${out}.tmp${process.pid}`;
  const args = [
    '-shared', '-fPIC', '-O2', '-g', '-std=gnu11', '-Wall', '-Wextra', '-Wno-unused-parameter',
    '-fvisibility=hidden',
    '-I', napiInclude, '-I', path.join(native, 'include'),
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
  process.stdout.write(`boxlite: built ${path.relative(process.cwd(), out) || out}` +
    (build ? ` with the library and assets of ${build}\n` : ' with the packaged library\n'));
}

main();
