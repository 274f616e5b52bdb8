"""boxlite: run untrusted code in microVM sandboxes ("boxes").

A box is a virtual machine with its own Linux kernel, booted from an OCI image.
This package is the Python SDK over libboxlite.so (bundled), with the API of
the BoxLite Python SDK::

    import asyncio, boxlite

    async def main():
        async with boxlite.SimpleBox(image="alpine:latest") as box:
            result = await box.exec("uname", "-a")
            print(result.exit_code, result.stdout)

    asyncio.run(main())
"""

from ._copy import CopyOptions
from .advanced import (AdvancedBoxOptions, ContainerCapabilities, HealthCheckOptions, HealthState, HealthStatus,
                       SecurityOptions)
from .box import Box, BoxInfo, BoxOptions, BoxStateInfo, NetworkInfo, NetworkSpec, PortMapping
from .code import CodeContext, CodeExecution, CodeResult, ExecutionError, Logs
from .codebox import CodeBox
from . import errors as _errors
from .errors import *  # noqa: F401,F403 (every error class: errors.__all__)
from .exec import ExecResult
from .execution import ExecStderr, ExecStdin, ExecStdout, Execution, ExitStatus
from .interactivebox import InteractiveBox
from .metrics import BoxMetrics, RuntimeMetrics
from .network import (BoxConnection, BoxTunnel, InboundNetworkInfo, InboundNetworkSpec, NetworkHandle, OutboundNetworkInfo,
                      OutboundNetworkSpec, SocketAddress, TunnelForwarder)
from .rest import ApiKeyCredential, BoxliteRestOptions
from .runtime import Boxlite, ImageDetail, ImageHandle, ImageInfo, ImagePullResult, ImageVersion, Options, WarmPool
from .session import CellChunk, CellError, CellResult, CellStream, PythonSession, ShellSession
from .registry import ImageRegistry
from .secret import Secret, SecretInfo
from .simplebox import SimpleBox
from .snapshot import CloneOptions, ExportOptions, SnapshotHandle, SnapshotInfo, SnapshotOptions
from .sync_api import (
    SyncBox,
    SyncBoxConnection,
    SyncBoxTunnel,
    SyncNetworkHandle,
    SyncSnapshotHandle,
    SyncTunnelForwarder,
    SyncBoxlite,
    SyncCodeBox,
    SyncExecStderr,
    SyncExecStdout,
    SyncExecution,
    SyncInteractiveBox,
    SyncSimpleBox,
)

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the bundled libboxlite.so."""
    from . import _ffi

    return _ffi.version()


__all__ = [
    "Boxlite", "Options", "WarmPool", "ImageRegistry", "ImageHandle", "ImageInfo", "ImageDetail", "ImageVersion", "ImagePullResult", "BoxliteRestOptions", "ApiKeyCredential",
    "AdvancedBoxOptions", "ContainerCapabilities", "SecurityOptions", "HealthCheckOptions", "HealthState", "HealthStatus",
    "Box", "BoxOptions", "BoxInfo", "Secret", "SecretInfo", "BoxStateInfo", "CopyOptions", "NetworkSpec", "NetworkInfo", "PortMapping",
    "BoxMetrics", "RuntimeMetrics",
    "OutboundNetworkSpec", "InboundNetworkSpec", "OutboundNetworkInfo", "InboundNetworkInfo",
    "NetworkHandle", "BoxTunnel", "BoxConnection", "TunnelForwarder", "SocketAddress",
    "SyncNetworkHandle", "SyncBoxTunnel", "SyncBoxConnection", "SyncTunnelForwarder",
    "Execution", "ExecStdout", "ExecStderr", "ExecStdin", "ExitStatus", "ExecResult",
    "SimpleBox", "CodeBox", "InteractiveBox",
    "PythonSession", "ShellSession", "CellResult", "CellError", "CellChunk", "CellStream",
    "CodeContext", "CodeExecution", "CodeResult", "ExecutionError", "Logs",
    "SnapshotHandle", "SnapshotInfo", "SnapshotOptions", "CloneOptions", "ExportOptions",
    "SyncBoxlite", "SyncBox", "SyncSnapshotHandle", "SyncExecution", "SyncExecStdout", "SyncExecStderr",
    "SyncSimpleBox", "SyncCodeBox", "SyncInteractiveBox",
    "library_version",
]
__all__ += _errors.__all__  # the form type checkers read (mypy: no implicit re-export)
