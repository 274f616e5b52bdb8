'use strict';
// Shared by the test files: where the build, the images and the home are.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const build = path.resolve(process.env.BOXLITE_BUILD_DIR || path.join(pkg, '..', '..', 'build'));
// make test exports BOXLITE_HOME (build/home); otherwise a home of the tests' own
const home = process.env.BOXLITE_HOME || path.join(os.tmpdir(), 'boxlite-node-test-home');
const images = {
  'alpine:latest': process.env.BOXLITE_TEST_IMAGE || path.join(build, 'images', 'alpine.tar'),
  'python:slim': process.env.BOXLITE_TEST_PYTHON_IMAGE || path.join(build, 'images', 'python.tar'),
};

/**
 * The `skip` of a test needing image `name`: always false. A missing image
 * fails the test file (never a suite that passes having tested nothing).
 */
function missingImage(name) {
  if (!fs.existsSync(images[name])) throw new Error(`${name} test image not found at ${images[name]}: \`make images\` builds it`);
  return false;
}

/**
 * With BOXLITE_REST_URL set (make test-rest-sdk), tests run on a REST runtime:
 * JsBoxlite.rest(BoxliteRestOptions.fromEnv()), the server's boxes.
 */
const REST = !!process.env.BOXLITE_REST_URL;

/** The tests' runtime: a local one on the tests' home, or the REST one. */
function newRuntime() {
  const { JsBoxlite, BoxliteRestOptions } = require('..');
  return REST ? JsBoxlite.rest(BoxliteRestOptions.fromEnv()) : new JsBoxlite({ homeDir: home });
}

/**
 * The `skip` of a test that needs a local runtime: on a REST one it is
 * skipped with the reason given (reported), never silently.
 */
function localOnly(reason) {
  return REST ? `local only on a REST runtime: ${reason}` : false;
}

/** Loads the image into the runtime's store unless it is there (a REST server's images are its own). */
async function ensureImage(rt, name) {
  if (REST) return;
  const have = await rt.listImages();
  if (have.some((i) => i.name === name || i.name === `docker.io/library/${name}`)) return;
  await rt.loadImage(images[name]);
}

/** The error a promise rejects with (fails the test if it resolves). */
async function rejection(p) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

function thrown(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an exception');
}

/** The boxlite-shim processes this test process started that still run: a box that boots has
 * one, so "nothing booted" compares this before and after instead of timing the call. */
function shimChildren() {
  const fs = require('node:fs');
  const pids = new Set();
  for (const task of fs.readdirSync(`/proc/${process.pid}/task`)) {
    let kids = '';
    try { kids = fs.readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8'); } catch { continue; }
    for (const pid of kids.split(/\s+/).filter(Boolean)) {
      try {
        if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'boxlite-shim') pids.add(Number(pid));
      } catch { /* it ended */ }
    }
  }
  return pids;
}

module.exports = { pkg, build, home, images, REST, newRuntime, localOnly, missingImage, ensureImage, rejection, thrown, shimChildren };
