'use strict';
// A runtime on a server of BoxLite's REST API (boxlite serve), as BoxLite's
// SDK opens one: JsBoxlite.rest(new BoxliteRestOptions({ url, credential:
// new ApiKeyCredential(key) })), or BoxliteRestOptions.fromEnv().
const { BoxliteError, unsupported } = require('./errors');
const { checkString, checkOutputLimit, isPlainObject, typeOf } = require('./options');

const KEY = Symbol('key');

/** An API key (boxlite serve key create), sent as Authorization: Bearer; never shown. */
class ApiKeyCredential {
  constructor(key) {
    checkString(key, 'ApiKeyCredential key');
    if (!key) throw new BoxliteError('ApiKeyCredential: the key is empty', { code: 'invalid_argument' });
    Object.defineProperty(this, KEY, { value: key, enumerable: false });
  }

  /** The key in $BOXLITE_API_KEY. */
  static fromEnv() {
    const key = process.env.BOXLITE_API_KEY;
    if (!key) throw new BoxliteError('BOXLITE_API_KEY is not set', { code: 'invalid_argument' });
    return new ApiKeyCredential(key);
  }

  /** The bearer token: the key itself. */
  getToken() {
    return this[KEY];
  }

  toString() {
    return 'ApiKeyCredential(<hidden>)';
  }

  toJSON() {
    return 'ApiKeyCredential(<hidden>)';
  }
}

/**
 * Where the server is and how to authenticate: { url, credential?,
 * pathPrefix?, outputLimitBytes?, insecureHttp? }. url is http or https
 * (plain http only to a loopback host unless insecureHttp). pathPrefix
 * (BoxLite cloud's routing slot) is not used by boxlite serve: giving one
 * is an 'unsupported' error.
 */
class BoxliteRestOptions {
  constructor(options) {
    if (!isPlainObject(options)) throw new TypeError(`BoxliteRestOptions: options must be an object, got ${typeOf(options)}`);
    const { url, credential, pathPrefix, outputLimitBytes, insecureHttp, ...rest } = options;
    const extra = Object.keys(rest);
    if (extra.length) throw new TypeError(`BoxliteRestOptions.${extra[0]} is not a known option (url, credential, pathPrefix, outputLimitBytes, insecureHttp)`);
    this.url = checkString(url, 'BoxliteRestOptions.url');
    if (credential !== undefined && credential !== null && !(credential instanceof ApiKeyCredential)) {
      throw new TypeError(`BoxliteRestOptions.credential must be an ApiKeyCredential, got ${typeOf(credential)}`);
    }
    this.credential = credential ?? null;
    this.pathPrefix = pathPrefix ?? null;
    this.outputLimitBytes = outputLimitBytes ?? null;
    if (insecureHttp !== undefined && typeof insecureHttp !== 'boolean') throw new TypeError('BoxliteRestOptions.insecureHttp must be a boolean');
    this.insecureHttp = insecureHttp ?? false;
  }

  /** From $BOXLITE_REST_URL (required), $BOXLITE_API_KEY and $BOXLITE_REST_PATH_PREFIX. */
  static fromEnv() {
    const url = process.env.BOXLITE_REST_URL;
    if (!url) throw new BoxliteError('BOXLITE_REST_URL is not set', { code: 'invalid_argument' });
    const key = process.env.BOXLITE_API_KEY;
    return new BoxliteRestOptions({ url, credential: key ? new ApiKeyCredential(key) : null, pathPrefix: process.env.BOXLITE_REST_PATH_PREFIX || null });
  }

  /** @internal boxlite_runtime_new_rest's options. */
  _json() {
    if (this.pathPrefix) throw unsupported('BoxliteRestOptions.pathPrefix: boxlite serve has no routing slot');
    if (!this.credential) throw new BoxliteError('BoxliteRestOptions: a credential is required (ApiKeyCredential)', { code: 'invalid_argument' });
    const o = { url: this.url, api_key: this.credential.getToken() };
    if (this.outputLimitBytes !== null) o.output_limit_bytes = checkOutputLimit(this.outputLimitBytes, 'BoxliteRestOptions.outputLimitBytes');
    if (this.insecureHttp) o.insecure_http = true;
    return JSON.stringify(o);
  }
}

module.exports = { ApiKeyCredential, BoxliteRestOptions };
