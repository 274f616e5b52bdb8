'use strict';
// runtime.images in BoxLite 0.10's shape (list, get, remove, pull) on a fresh
// home of its own; no box boots.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { JsBoxlite, BoxliteError, errorCode } = require('..');
const { missingImage, rejection, localOnly } = require('./helpers');

const alpine = process.env.BOXLITE_TEST_IMAGE || path.join(__dirname, '..', '..', '..', 'build', 'images', 'alpine.tar');

test('the image catalog', { skip: missingImage('alpine:latest') || localOnly('images.load needs a local store'), timeout: 120_000 }, async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'bxl-images-'));
  const rt = new JsBoxlite({ homeDir: home });
  try {
    await rt.images.load(alpine);
    const [info] = await rt.images.list();
    assert.equal(info.reference, 'docker.io/library/alpine:latest');
    assert.deepEqual([info.repository, info.tag, info.id], ['docker.io/library/alpine', 'latest', info.digest]);
    assert.ok(info.sizeBytes > 0 && info.size === info.sizeBytes && info.cachedAt.endsWith('Z'), JSON.stringify(info));
    const d = await rt.images.get('alpine');
    assert.deepEqual([d.name, d.tags, d.curated, d.versions.length], ['docker.io/library/alpine', ['latest'], false, 1]);
    assert.equal(d.versions[0].digest, info.digest);
    assert.equal(errorCode(await rejection(rt.images.get('busybox'))), 'not_found');
    const e = await rejection(rt.images.pull('127.0.0.1:9/nope:1'));
    assert.ok(e instanceof BoxliteError && e.code === 'unreachable', String(e));
    await rt.images.remove('alpine');
    assert.deepEqual(await rt.images.list(), []);
    assert.equal(errorCode(await rejection(rt.images.remove('alpine'))), 'not_found');
    await assert.rejects(rt.images.get(5), TypeError);
  } finally {
    await rt.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
});
