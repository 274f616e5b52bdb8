'use strict';
// The raw layer as the friendly layer sees it: the same functions, with the
// library's errors turned into BoxliteError / TimeoutError (code kept).
const raw = require('./raw');
const { fromNative } = require('./errors');

const rethrow = (e) => {
  throw fromNative(e);
};

const native = {};
for (const [name, value] of Object.entries(raw)) {
  if (typeof value !== 'function') {
    native[name] = value;
    continue;
  }
  native[name] = function (...args) {
    let r;
    try {
      r = value(...args);
    } catch (e) {
      throw fromNative(e);
    }
    return r instanceof Promise ? r.catch(rethrow) : r;
  };
}
module.exports = Object.freeze(native);
