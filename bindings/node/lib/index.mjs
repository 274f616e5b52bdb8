// ES module entry: the same objects as the CommonJS one.
import boxlite from './index.js';

export const {
  JsBoxlite, Boxlite, ApiKeyCredential, BoxliteRestOptions, Box, JsBox, SnapshotHandle, JsSnapshotHandle, NetworkHandle, BoxTunnel, TunnelForwarder, BoxConnection, Execution, JsExecution, OutputStream, StdinWriter,
  SimpleBox, CodeBox, InteractiveBox, PythonSession, ShellSession, CellStream, CodeContext, CodeExecution, CodeResult,
  BoxliteError, ExecError, TimeoutError, ParseError, errorCode, ERROR_CODES, version, Secret, JsSecret, SecurityOptions, HEALTH_CHECK_DEFAULTS,
  DEFAULT_CPUS, DEFAULT_MEMORY_MIB,
} = boxlite;
export default boxlite;
