'use strict';
// Code contexts: a code interpreter's persistent sessions with rich results,
// as E2B's code interpreter (CodeBox.runCode). A context is a session of kind
// "code:LANGUAGE" of the C ABI; boxlite_session_run_code returns the
// execution's JSON (internal/abi.CodeExecution).
const raw = require('./raw');
const { call, closed } = require('./cell');
const { fromNative, TimeoutError } = require('./errors');
const { checkSeconds, checkString, normalizeEnv, isPlainObject, typeOf } = require('./options');

const LANGUAGES = {
  '': 'python', python: 'python', python3: 'python', py: 'python',
  javascript: 'javascript', js: 'javascript', node: 'javascript', nodejs: 'javascript',
  bash: 'bash', sh: 'bash', shell: 'bash',
};

/** python, javascript or bash; a TypeError for others. */
function normalizeLanguage(language) {
  if (language === undefined || language === null) return 'python';
  checkString(language, 'language', { allowEmpty: true });
  const l = LANGUAGES[language.trim().toLowerCase()];
  if (!l) throw new TypeError(`language ${JSON.stringify(language)} is not python, javascript or bash`);
  return l;
}

// MIME type -> Result field, as E2B's server names them.
const FIELDS = {
  'text/plain': 'text', 'text/html': 'html', 'text/markdown': 'markdown', 'image/svg+xml': 'svg',
  'image/png': 'png', 'image/jpeg': 'jpeg', 'application/pdf': 'pdf', 'text/latex': 'latex',
  'application/json': 'json', 'application/javascript': 'javascript',
};
const FORMATS = ['text', 'html', 'markdown', 'svg', 'png', 'jpeg', 'pdf', 'latex', 'json', 'javascript'];

/**
 * A rich result: one representation per format (png and jpeg in base64,
 * json decoded), others in extra by MIME type. isMainResult: the value of
 * the cell's last expression. The text of a string value has its quotes
 * taken off, as E2B's.
 */
class Result {
  constructor(data, isMainResult) {
    this.isMainResult = !!isMainResult;
    this.raw = { ...data };
    this.extra = {};
    for (const [mime, value] of Object.entries(data || {})) {
      const f = FIELDS[mime];
      if (!f) {
        this.extra[mime] = value;
      } else if (f === 'json') {
        try {
          this.json = JSON.parse(value);
        } catch {
          this.extra[mime] = value;
        }
      } else {
        this[f] = value;
      }
    }
    const t = this.text;
    if (typeof t === 'string' && t.length >= 2 && t[0] === t[t.length - 1] && (t[0] === "'" || t[0] === '"')) {
      this.text = t.slice(1, -1);
    }
  }

  /** The formats it has ('text', 'html', 'png'...), then its extra MIME types. */
  formats() {
    return FORMATS.filter((f) => this[f] !== undefined).concat(Object.keys(this.extra));
  }
}

/** What a cell did: results, logs {stdout, stderr}, error {name, value, traceback}, executionCount. */
class Execution {
  constructor(w) {
    const lg = w.logs || {};
    this.results = (w.results || []).map((r) => new Result(r.data, r.is_main_result));
    this.logs = {
      stdout: lg.stdout || [], stderr: lg.stderr || [],
      stdoutTruncated: !!lg.stdout_truncated, stderrTruncated: !!lg.stderr_truncated,
    };
    this.error = w.error ? { name: w.error.name, value: w.error.value, traceback: w.error.traceback } : undefined;
    this.executionCount = w.execution_count;
    this.resultsTruncated = !!w.results_truncated;
    this.restarted = !!w.restarted;
    this.timedOut = !!w.timed_out;
  }

  /** The main result's text (undefined when the cell has none). */
  get text() {
    const m = this.results.find((r) => r.isMainResult);
    return m ? m.text : undefined;
  }
}

function contextOptions(o, where) {
  if (o === undefined || o === null) return null;
  if (!isPlainObject(o)) throw new TypeError(`${where} must be an object, got ${typeOf(o)}`);
  const known = ['env', 'cwd', 'user', 'graceSecs'];
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new TypeError(`${where}.${k} is not a known option (${known.join(', ')})`);
  }
  const c = {};
  const env = normalizeEnv(o.env, `${where}.env`);
  if (env && Object.keys(env).length) c.env = env;
  if (o.cwd != null) c.cwd = checkString(o.cwd, `${where}.cwd`);
  if (o.user != null) c.user = checkString(o.user, `${where}.user`);
  if (o.graceSecs != null) c.grace_secs = checkSeconds(o.graceSecs, `${where}.graceSecs`);
  return JSON.stringify(c);
}

function runOptions(o) {
  if (o === undefined || o === null) return null;
  if (!isPlainObject(o)) throw new TypeError(`options must be an object, got ${typeOf(o)}`);
  for (const k of Object.keys(o)) {
    if (!['timeoutSecs', 'envs', 'language', 'context'].includes(k)) {
      throw new TypeError(`options.${k} is not a known option (language, context, timeoutSecs, envs)`);
    }
  }
  const c = {};
  if (o.timeoutSecs != null) c.timeout_secs = checkSeconds(o.timeoutSecs, 'options.timeoutSecs');
  const env = normalizeEnv(o.envs, 'options.envs');
  if (env && Object.keys(env).length) c.env = env;
  return Object.keys(c).length ? JSON.stringify(c) : null;
}

/** A code interpreter's context in a box: python, javascript (Node) or bash. */
class CodeContext {
  /** @internal */
  constructor(box, handle, language) {
    this._box = box; // keeps the box handle alive
    this._h = handle;
    this.language = language;
    this._closed = false;
  }

  /** @internal Starts a context in a JsBox. */
  static async _start(box, language, options) {
    const lang = normalizeLanguage(language);
    const json = contextOptions(options, 'options');
    const h = await call(raw.sessionNew, box._handle('code context'), 'code:' + lang, json);
    return new CodeContext(box, h, lang);
  }

  get closed() {
    return this._closed;
  }

  _handle() {
    if (this._closed) throw closed(`${this.language} code context`);
    return this._h;
  }

  /**
   * Runs code as a cell; resolves to an Execution (an exception in the cell
   * is its error). options: {timeoutSecs (interrupts the cell: rejects with
   * TimeoutError whose execution is what it did), envs (this cell only)}.
   */
  async runCode(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    const json = runOptions(options);
    try {
      return new Execution(JSON.parse(await raw.sessionRunCode(this._handle(), code, json)));
    } catch (e) {
      const err = fromNative(e);
      if (err instanceof TimeoutError && e && typeof e.resultJson === 'string') {
        err.execution = new Execution(JSON.parse(e.resultJson));
      }
      throw err;
    }
  }

  /** A fresh interpreter: the state is gone, the count starts again. */
  async restart() {
    await call(raw.sessionReset, this._handle());
  }

  /** Stops the interpreter. Idempotent. */
  close() {
    if (this._closed) return;
    this._closed = true;
    raw.sessionFree(this._h);
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }
}

module.exports = { CodeContext, Execution, Result, normalizeLanguage, runOptions };
