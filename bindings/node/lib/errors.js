'use strict';
// BoxLite's error classes, plus the library's stable error kinds as `code`.

// BEGIN GENERATED: error codes (go generate ./errdefs; do not edit)
/** Stable kind names: the C ABI's boxlite_status_name() of each error. */
const CODES = Object.freeze([
  'invalid_argument',
  'not_found',
  'already_exists',
  'invalid_state',
  'timeout',
  'unsupported',
  'boot_failed',
  'closed',
  'limit',
  'internal',
  'unreachable',
]);
// END GENERATED: error codes

/** Base class of every error the SDK raises (besides TypeError / RangeError for bad arguments). */
class BoxliteError extends Error {
  constructor(message, options = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'BoxliteError';
    /** One of CODES (the library's error kind), or undefined for SDK-level errors. */
    this.code = options.code;
  }
}

/** A command failed: non-zero exit code (CodeBox.run, installPackage). */
class ExecError extends BoxliteError {
  constructor(command, exitCode, stderr, options = {}) {
    super(`Command '${command}' failed with exit code ${exitCode}: ${stderr}`, { code: options.code, cause: options.cause });
    this.name = 'ExecError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
    if (options.stdout !== undefined) this.stdout = options.stdout;
  }
}

/** An operation or a command ran out of time (code "timeout"). */
class TimeoutError extends BoxliteError {
  constructor(message, options = {}) {
    super(message, { code: 'timeout', cause: options.cause });
    this.name = 'TimeoutError';
    for (const k of ['command', 'exitCode', 'stdout', 'stderr']) {
      if (options[k] !== undefined) this[k] = options[k];
    }
  }
}

/** Output could not be parsed. */
class ParseError extends BoxliteError {
  constructor(message, options = {}) {
    super(message, options);
    this.name = 'ParseError';
  }
}

/** The library error behind a raw-layer Error, as a BoxliteError (TypeError and RangeError stay as they are). */
function fromNative(e) {
  if (!(e instanceof Error) || e instanceof BoxliteError || e instanceof TypeError || e instanceof RangeError) return e;
  if (!CODES.includes(e.code)) return e;
  const err = e.code === 'timeout' ? new TimeoutError(e.message) : new BoxliteError(e.message, { code: e.code });
  if (e.stack) err.stack = `${err.name}: ${err.message}\n${e.stack.split('\n').slice(1).join('\n')}`;
  return err;
}

/** The library's error kind of err ("not_found", "timeout", ...), or undefined. */
function errorCode(err) {
  return err && typeof err === 'object' && CODES.includes(err.code) ? err.code : undefined;
}

function unsupported(message) {
  return new BoxliteError(message, { code: 'unsupported' });
}

module.exports = { BoxliteError, ExecError, TimeoutError, ParseError, CODES, fromNative, errorCode, unsupported };
