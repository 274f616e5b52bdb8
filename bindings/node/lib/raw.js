'use strict';
// The raw layer: native/boxlite.node, one function per function of
// include/boxlite.h (see src/calls.c). The friendly layer (index.js) calls
// only this; programs may use it directly through require('boxlite-go/raw').
const path = require('node:path');

let raw;
try {
  raw = require(path.join(__dirname, '..', 'native', 'boxlite.node'));
} catch (e) {
  const err = new Error(
    `boxlite: cannot load the native addon (${e.message}). ` +
      'Build it with `npm install` in the package folder (it needs `make build` in the boxlite repository first).',
  );
  err.code = 'internal';
  err.cause = e;
  throw err;
}
module.exports = raw;
