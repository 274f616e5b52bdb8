'use strict';
// boxlite: run untrusted code in microVM sandboxes. BoxLite's Node API
// (JsBoxlite, SimpleBox, CodeBox, InteractiveBox, ExecError, ...) over
// libboxlite.so. This friendly layer makes no FFI calls of its own: it
// calls the raw layer (./raw, src/calls.c), one function per C function.
const native = require('./native');
const { JsBoxlite, Boxlite } = require('./runtime');
const { ApiKeyCredential, BoxliteRestOptions } = require('./rest');
const { Box } = require('./box');
const { SnapshotHandle } = require('./snapshot');
const { NetworkHandle, BoxTunnel, TunnelForwarder, BoxConnection } = require('./network');
const { Execution, OutputStream, StdinWriter } = require('./execution');
const { SimpleBox } = require('./simplebox');
const { CodeBox } = require('./codebox');
const { InteractiveBox } = require('./interactivebox');
const { PythonSession, ShellSession, CellStream } = require('./session');
const { Secret } = require('./secret');
const { SecurityOptions, HEALTH_CHECK_DEFAULTS } = require('./advanced');
const { CodeContext, Execution: CodeExecution, Result: CodeResult } = require('./code');
const { BoxliteError, ExecError, TimeoutError, ParseError, errorCode, CODES } = require('./errors');

/** The library version, "MAJOR.MINOR.PATCH". */
function version() {
  return native.version();
}

module.exports = {
  JsBoxlite,
  Boxlite,
  ApiKeyCredential,
  BoxliteRestOptions,
  Box,
  JsBox: Box,
  SnapshotHandle,
  JsSnapshotHandle: SnapshotHandle,
  NetworkHandle,
  BoxTunnel,
  TunnelForwarder,
  BoxConnection,
  Execution,
  JsExecution: Execution,
  OutputStream,
  StdinWriter,
  SimpleBox,
  CodeBox,
  InteractiveBox,
  PythonSession,
  ShellSession,
  CellStream,
  CodeContext,
  CodeExecution,
  CodeResult,
  BoxliteError,
  ExecError,
  TimeoutError,
  ParseError,
  errorCode,
  ERROR_CODES: CODES,
  Secret,
  JsSecret: Secret,
  SecurityOptions,
  HEALTH_CHECK_DEFAULTS,
  version,
  ...require('./defaults'), // DEFAULT_MEMORY_MIB, DEFAULT_CPUS, ...: generated from internal/abi
};
