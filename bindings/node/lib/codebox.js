'use strict';
// CodeBox: a SimpleBox whose run() talks to a live Python interpreter.
const { SimpleBox } = require('./simplebox');
const { ExecError } = require('./errors');
const { execOptions, checkArgs, checkString, isPlainObject } = require('./options');
const { PythonSession, CellStream, truncationMarker } = require('./session');
const { CodeContext, normalizeLanguage, runOptions } = require('./code');

// The name of run()'s session in the box (options.sessionName; null: none).
const DEFAULT_SESSION_NAME = 'codebox';

class CodeBox extends SimpleBox {
  /**
   * new CodeBox({ image = 'python:slim', sessionName = 'codebox', ...SimpleBox options })
   *
   * run() talks to one long-lived Python interpreter in the box (a session):
   * variables, imports and definitions of one call are there for the next.
   */
  constructor(options = {}) {
    let sessionName = DEFAULT_SESSION_NAME;
    if (isPlainObject(options) && 'sessionName' in options) {
      const { sessionName: n, ...rest } = options;
      if (n === null) sessionName = null;
      else if (n !== undefined) sessionName = checkString(n, 'options.sessionName');
      options = rest;
    }
    // A box started from a template finds run()'s interpreter started.
    super(isPlainObject(options) && options.prestart === undefined ? { ...options, prestart: ['python'] } : options);
    this._sessionName = sessionName;
    this._initSessions();
  }

  /** @internal Fresh session state (the constructor's, a fork's). */
  _initSessions() {
    this._session = null; // Promise of the default session
    this._sessions = [];
    this._contexts = new Map(); // language -> Promise of its default code context
  }

  _defaultImage() {
    return 'python:slim';
  }

  /** The default session that run() uses, started on first use. */
  session() {
    if (!this._session) {
      // run()'s interpreter is a named session on a local runtime: it
      // outlives this object, so a CodeBox on the same box in another
      // process, after a pause or in a fork takes it over with its state.
      const name = this._sessionName !== null && !this._runtime._remote ? this._sessionName : undefined;
      this._session = this.newSession(name === undefined ? undefined : { name });
      this._session.catch(() => {
        this._session = null; // a later call tries again
      });
    }
    return this._session.then((s) => {
      if (!s.closed) return s;
      this._session = null;
      return this.session();
    });
  }

  /**
   * Starts another interpreter in the box, independent of run()'s.
   * options: { env, cwd, user, graceSecs (default 3: how long an interrupted
   * cell has to stop before the interpreter is killed and restarted), python }.
   */
  async newSession(options) {
    const box = await this._ensureBox();
    const s = await PythonSession._start(box, options);
    this._sessions = this._sessions.filter((x) => !x.closed).concat(s);
    return s;
  }

  /**
   * Runs Python code as a cell of the session; resolves to its stdout.
   * Rejects with ExecError (exitCode, stderr with the traceback, stdout) when
   * the code fails, TimeoutError on a timeout (the session keeps its state,
   * unless the cell ignored the interrupt: then the interpreter was restarted
   * and the message says so). options: { timeoutSecs } (or timeout, in
   * seconds). With env, cwd or user the code runs in a fresh `python3 -c`
   * instead, outside the session.
   */
  async run(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    const o = execOptions(options, 'options');
    if (o.env !== undefined || o.cwd !== undefined || o.user !== undefined) {
      const r = await this._collect(['python3', '-c', code], {
        timeoutSecs: o.timeoutSecs, env: o.env, cwd: o.cwd, user: o.user, outputLimitBytes: o.outputLimitBytes,
      });
      if (r.exitCode !== 0) throw new ExecError('run()', r.exitCode, r.stderr, { stdout: r.stdout });
      return r.stdout + truncationMarker(r.stdoutTruncated, false, o.outputLimitBytes ?? this._runtime.outputLimitBytes);
    }
    const r = await this.runCell(code, options);
    if (r.error) throw new ExecError('run()', r.exitCode, r.stderr + r.error.traceback, { stdout: r.stdout });
    return r.stdout + truncationMarker(r.stdoutTruncated, false, r.outputLimitBytes);
  }

  /**
   * Runs a cell; resolves to {stdout, stderr, value (repr of a trailing
   * expression, as a notebook shows it, or null), error: {type, message,
   * traceback} | null, exitCode, timedOut, restarted}. An exception is a
   * result, not a rejection; a timeout rejects with TimeoutError (`result`).
   */
  async runCell(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    return (await this.session()).runCell(code, options);
  }

  /**
   * A cell whose output arrives while it runs:
   *   const cell = codebox.stream(code);
   *   for await (const { stream, text } of cell) process.stdout.write(text);
   *   const result = await cell.result();
   */
  stream(code, options) {
    return new CellStream(() => this.session(), code, options);
  }

  /**
   * Runs code as E2B's code interpreter does; resolves to an Execution:
   * results (the last expression's value, display() calls and matplotlib
   * figures, each with .text, .html, .png..., isMainResult), logs {stdout,
   * stderr} (lists), error {name, value, traceback} and executionCount.
   * options: {language: 'python' (default) | 'javascript' | 'bash' (each
   * has a default context in the box, started on first use, apart from
   * run()'s interpreter), context (from createCodeContext, instead of a
   * language), timeoutSecs (rejects with TimeoutError whose execution is
   * what it did), envs (this cell only)}.
   */
  async runCode(code, options) {
    checkString(code, 'code', { allowEmpty: true });
    runOptions(options); // refuses unknown options before anything starts
    const o = options || {};
    if (o.context !== undefined && o.context !== null) {
      if (o.language !== undefined) throw new TypeError('give a language or a context, not both');
      if (!(o.context instanceof CodeContext)) throw new TypeError('options.context must be a CodeContext');
      return o.context.runCode(code, { timeoutSecs: o.timeoutSecs, envs: o.envs });
    }
    const lang = normalizeLanguage(o.language);
    let p = this._contexts.get(lang);
    if (!p || (p.settled && p.settled.closed)) {
      p = this.createCodeContext(lang);
      this._contexts.set(lang, p);
      p.then((c) => { p.settled = c; }, () => this._contexts.delete(lang));
    }
    return (await p).runCode(code, { timeoutSecs: o.timeoutSecs, envs: o.envs });
  }

  /** Starts another code context (python, javascript or bash); options {cwd, env, user, graceSecs}. Closed with the box. */
  async createCodeContext(language, options) {
    const box = await this._ensureBox();
    const c = await CodeContext._start(box, language, options);
    this._sessions = this._sessions.filter((x) => !x.closed).concat(c);
    return c;
  }

  /** Restarts run()'s interpreter: all its state is gone. */
  async reset() {
    await (await this.session()).reset();
  }

  stop() {
    const sessions = this._sessions;
    this._sessions = [];
    this._session = null;
    this._contexts = new Map();
    for (const s of sessions) s.close();
    return super.stop();
  }

  /** Runs a Python script file of the host. */
  async runScript(scriptPath) {
    checkString(scriptPath, 'scriptPath');
    const code = await require('node:fs/promises').readFile(scriptPath, 'utf8');
    return this.run(code);
  }

  /** pip install; rejects with ExecError when pip fails. */
  async installPackage(packageName) {
    checkString(packageName, 'packageName');
    return this._pip([packageName], `installPackage('${packageName}')`);
  }

  async installPackages(...packages) {
    checkArgs(packages, 'packages');
    if (!packages.length) throw new TypeError('installPackages needs at least one package');
    return this._pip(packages, `installPackages(${packages.join(', ')})`);
  }

  async _pip(packages, what) {
    const r = await this._collect(['python3', '-m', 'pip', 'install', '--quiet', ...packages], {});
    if (r.exitCode !== 0) throw new ExecError(what, r.exitCode, r.stderr, { stdout: r.stdout });
    return r.stdout;
  }
}

module.exports = { CodeBox };
