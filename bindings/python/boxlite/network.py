"""A box's network handle (``box.network``): tunnels to ports in the box.

A tunnel is a TCP connection to a port on the box's own loopback, carried
over the box's agent channel: it needs no published port and no network in
the box (``network="disabled"`` boxes serve through one). As BoxLite's, a
prepared tunnel (``await box.network.tunnel(port)``) is used once, by
``connect()`` (a byte stream) or ``forward(address)`` (a listener on this
host that carries each connection it accepts over a tunnel of its own).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import _ffi as raw
from ._aio import blocking
from .errors import ClosedError, InvalidStateError

if TYPE_CHECKING:
    from .box import Box

__all__ = ["NetworkHandle", "BoxTunnel", "BoxConnection", "TunnelForwarder", "SocketAddress"]


def _check_port(port: Any, what: str = "port") -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"{what} must be an integer between 1 and 65535")
    return port


@dataclass(frozen=True)
class SocketAddress:
    """Where a forwarder listens: ``SocketAddress.tcp(host="127.0.0.1", port=0)``
    (a numeric IP; port 0 picks a free one) or ``SocketAddress.unix(path)``
    (an absolute path; the file must not exist, and goes with the forwarder)."""

    type: str
    host: Optional[str] = None
    port: Optional[int] = None
    path: Optional[str] = None

    @classmethod
    def tcp(cls, host: str = "127.0.0.1", port: int = 0) -> "SocketAddress":
        if not isinstance(host, str):
            raise TypeError(f"host must be str, not {type(host).__name__}")
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        except OSError:
            raise ValueError("tunnel listener host must be a numeric IP") from None
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be an integer between 0 and 65535")
        return cls("tcp", host=host, port=port)

    @classmethod
    def unix(cls, path: Any) -> "SocketAddress":
        p = os.fspath(path)
        if not isinstance(p, str) or not os.path.isabs(p):
            raise ValueError("tunnel Unix socket path must be absolute")
        return cls("unix", path=p)

    def _json(self) -> str:
        if self.type == "tcp":
            return json.dumps({"type": "tcp", "host": self.host or "127.0.0.1", "port": self.port or 0})
        if self.type == "unix":
            return json.dumps({"type": "unix", "path": self.path})
        raise ValueError(f"SocketAddress type {self.type!r}: want 'tcp' or 'unix'")

    @classmethod
    def _from_json(cls, d: dict) -> "SocketAddress":
        if d.get("type") == "unix":
            return cls("unix", path=d.get("path"))
        return cls("tcp", host=d.get("host"), port=d.get("port", 0))


class BoxConnection:
    """A connection to a port in the box (``BoxTunnel.connect()``).

    ``read(max_bytes)`` returns up to that many bytes, ``b""`` once the box's
    side has closed (or half-closed); ``write(data)`` sends all of it;
    ``shutdown_write()`` half-closes (the box's side reads EOF and may still
    answer); ``close()`` ends it. ``fileno()`` is the socket under it, for
    event loops and libraries that take a socket."""

    def __init__(self, fd: int, port: int):
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(False)
        self._port = port
        self._closed = False

    def _live(self) -> socket.socket:
        if self._closed:
            raise ClosedError(f"tunnel to port {self._port}: connection is closed")
        return self._sock

    async def read(self, max_bytes: int = 65536) -> bytes:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError("max_bytes must be an int")
        if max_bytes <= 0:
            raise ValueError("max_bytes must be non-zero")
        return await asyncio.get_running_loop().sock_recv(self._live(), max_bytes)

    async def write(self, data: Any) -> int:
        b = bytes(data)
        await asyncio.get_running_loop().sock_sendall(self._live(), b)
        return len(b)

    async def shutdown_write(self) -> None:
        self._live().shutdown(socket.SHUT_WR)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()

    def fileno(self) -> int:
        return self._live().fileno()

    @property
    def port(self) -> int:
        return self._port

    async def __aenter__(self) -> "BoxConnection":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"BoxConnection(port={self._port}{', closed' if self._closed else ''})"


class TunnelForwarder:
    """A listener on this host carrying each connection to a port in the box
    (``BoxTunnel.forward()``): ``local_addr()``, ``await wait()`` (until
    closed), ``await close()``."""

    def __init__(self, handle: raw.Handle, port: int):
        self._h = handle
        self._port = port
        self._addr = SocketAddress._from_json(json.loads(raw.forwarder_local_addr(handle)))

    def local_addr(self) -> SocketAddress:
        return self._addr

    async def wait(self) -> None:
        while not await blocking(raw.forwarder_wait, self._h, 1000):
            pass

    async def close(self) -> None:
        if not self._h.closed:
            await blocking(raw.forwarder_close, self._h)
            self._h.close()

    async def __aenter__(self) -> "TunnelForwarder":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"TunnelForwarder(port={self._port}, local_addr={self._addr})"


class BoxTunnel:
    """A prepared one-shot tunnel to a port in the box: consumed by
    ``connect()`` or ``forward()``; ``uri()`` is None for a local box (it has
    no public URL)."""

    def __init__(self, box: "Box", port: int):
        self._box = box
        self._port = port
        self._used = False  # one-shot

    def _take(self, what: str) -> None:
        if self._used:
            raise InvalidStateError(f"tunnel to port {self._port}: {what}: the tunnel was used already (a tunnel is one-shot)")
        self._used = True

    def uri(self) -> Optional[str]:
        return None

    async def connect(self) -> BoxConnection:
        self._take("connect")
        fd = await blocking(raw.box_tunnel_connect, self._box._handle(), self._port)
        return BoxConnection(fd, self._port)

    async def forward(self, listen: SocketAddress) -> TunnelForwarder:
        if not isinstance(listen, SocketAddress):
            raise TypeError(f"listen must be boxlite.SocketAddress, not {type(listen).__name__}")
        self._take("forward")
        h = await blocking(raw.box_tunnel_forward, self._box._handle(), self._port, listen._json(),
                           on_abandon=lambda h: h.close())
        return TunnelForwarder(h, self._port)

    def __repr__(self) -> str:
        return f"BoxTunnel(port={self._port}{', used' if self._used else ''})"


class NetworkHandle:
    """``box.network`` (and ``SimpleBox.network``): tunnels to ports in the box."""

    def __init__(self, box: Callable[[], "Box"]):
        self._box = box  # the box, when it is needed (a SimpleBox's once started)

    async def tunnel(self, port: int) -> BoxTunnel:
        """Prepare a one-shot tunnel to a TCP port inside the box."""
        return BoxTunnel(self._box(), _check_port(port))

    async def revoke_tunnel(self, port: int) -> None:
        """BoxLite withdraws a port's public access; a local box has none to
        withdraw, so this checks the port and does nothing (open connections
        and forwarders are not closed, as in BoxLite)."""
        _check_port(port)

    def __repr__(self) -> str:
        return "NetworkHandle()"
