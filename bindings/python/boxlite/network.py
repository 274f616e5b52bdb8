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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import _ffi as raw
from ._aio import blocking
from ._checks import check_optional_int, check_str
from .errors import ClosedError, InvalidArgumentError, InvalidStateError

if TYPE_CHECKING:
    from .box import Box

__all__ = ["NetworkHandle", "BoxTunnel", "BoxConnection", "TunnelForwarder", "SocketAddress", "NetworkSpec",
           "OutboundNetworkSpec", "InboundNetworkSpec", "NetworkInfo", "OutboundNetworkInfo", "InboundNetworkInfo",
           "PortMapping"]


# ---- the network policy (BoxOptions.network, update_outbound, info().network) ----------


def _allow_list(allow: Any, what: str) -> Optional[List[str]]:
    if allow is None:
        return None
    if isinstance(allow, (str, bytes)) or not isinstance(allow, (list, tuple)):
        raise TypeError(f"{what} must be a list of str, not {type(allow).__name__}")
    return [check_str(a, f"{what}[{i}]") for i, a in enumerate(allow)]


@dataclass
class OutboundNetworkSpec:
    """Where the box may connect: ``mode`` "enabled" (a NIC with NAT to the
    host's network) or "disabled" (nothing); ``allow_net`` limits an enabled
    box to host names ("pypi.org"), wildcards ("*.example.com"), IPv4
    addresses or CIDRs, each optionally with ":port" (empty: anywhere)."""

    mode: str = "enabled"
    allow_net: List[str] = field(default_factory=list)

    def _json(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {"mode": check_str(self.mode, f"{what}.mode")}
        allow = _allow_list(self.allow_net, f"{what}.allow_net")
        if allow:
            o["allow_net"] = allow
        return o


@dataclass
class InboundNetworkSpec:
    """BoxLite's inbound mode: "enabled" (publicly reachable in BoxLite's
    cloud) or "disabled". A local box has no public side: the mode is kept
    and reported; a non-empty ``allow_net`` is refused (UnsupportedError),
    as BoxLite refuses it."""

    mode: str = "enabled"
    allow_net: List[str] = field(default_factory=list)

    def _json(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {"mode": check_str(self.mode, f"{what}.mode")}
        allow = _allow_list(self.allow_net, f"{what}.allow_net")
        if allow:
            o["allow_net"] = allow
        return o


@dataclass
class NetworkSpec:
    """A box's network (``BoxOptions.network``), as BoxLite 0.10:
    ``NetworkSpec(outbound=OutboundNetworkSpec(...), inbound=InboundNetworkSpec(...))``,
    or the earlier flat form ``NetworkSpec(mode=..., allow_net=[...])``
    (the outbound's), not both. The box reaches the host's 127.0.0.1 as
    ``host.boxlite.internal`` (with allow_net, only when listed). The library
    checks the values when the box is created."""

    mode: Optional[str] = None
    allow_net: Optional[List[str]] = None
    outbound: Optional[OutboundNetworkSpec] = None
    inbound: Optional[InboundNetworkSpec] = None


_SPLIT_KEYS = ("outbound", "inbound", "mode", "allow_net")


def _direction(v: Any, cls: type, what: str) -> Dict[str, Any]:
    if isinstance(v, cls):
        return v._json(what)
    if isinstance(v, Mapping):
        extra = sorted(set(v) - {"mode", "allow_net"})
        if extra:
            raise TypeError(f"{what} has an unknown key {extra[0]!r} (keys: mode, allow_net)")
        if "mode" not in v:
            raise TypeError(f"{what} needs a mode ('enabled' or 'disabled')")
        return cls(mode=v["mode"], allow_net=v.get("allow_net") or [])._json(what)
    raise TypeError(f"{what} must be boxlite.{cls.__name__} or a dict, not {type(v).__name__}")


def network_json(network: Any, what: str) -> Optional[Dict[str, Any]]:
    """NetworkSpec, a mode string, or a dict -> the C ABI's network object."""
    if network is None:
        return None
    if isinstance(network, str):
        return {"mode": network}
    if isinstance(network, NetworkSpec):
        d = {"mode": network.mode, "allow_net": network.allow_net, "outbound": network.outbound, "inbound": network.inbound}
    elif isinstance(network, Mapping):
        extra = sorted(set(network) - set(_SPLIT_KEYS))
        if extra:
            raise TypeError(f"{what} has an unknown key {extra[0]!r} (keys: {', '.join(_SPLIT_KEYS)})")
        d = {k: network.get(k) for k in _SPLIT_KEYS}
    else:
        raise TypeError(f"{what} must be boxlite.NetworkSpec, 'enabled' or 'disabled', not {type(network).__name__}")
    if d["outbound"] is not None or d["inbound"] is not None:
        if d["mode"] is not None or d["allow_net"] is not None:
            raise InvalidArgumentError(f"{what}: the flat mode/allow_net and outbound/inbound cannot be mixed")
        o: Dict[str, Any] = {}
        if d["outbound"] is not None:
            o["outbound"] = _direction(d["outbound"], OutboundNetworkSpec, f"{what}.outbound")
        if d["inbound"] is not None:
            o["inbound"] = _direction(d["inbound"], InboundNetworkSpec, f"{what}.inbound")
        return o
    o = {"mode": check_str(d["mode"] if d["mode"] is not None else "enabled", f"{what}.mode")}
    allow = _allow_list(d["allow_net"], f"{what}.allow_net")
    if allow:
        o["allow_net"] = allow
    return o


_PORT_KEYS = ("host_port", "guest_port", "protocol", "host_ip")


def ports_json(ports: Any, what: str) -> List[Dict[str, Any]]:
    """``[(host_port, guest_port), (host_port, guest_port, "udp"), {...}]`` ->
    the C ABI's ports; host_port 0 or None picks a free port."""
    if ports is None:
        return []
    if isinstance(ports, (str, bytes, Mapping)) or not isinstance(ports, (list, tuple)):
        raise TypeError(f"{what} must be a list of (host_port, guest_port[, protocol]) tuples, not {type(ports).__name__}")
    out = []
    for i, p in enumerate(ports):
        w = f"{what}[{i}]"
        if isinstance(p, Mapping):
            extra = sorted(set(p) - set(_PORT_KEYS))
            if extra:
                raise TypeError(f"{w} has an unknown key {extra[0]!r} (keys: {', '.join(_PORT_KEYS)})")
            d = dict(p)
        elif isinstance(p, (tuple, list)) and len(p) in (2, 3):
            d = dict(zip(("host_port", "guest_port", "protocol"), p))
        else:
            raise TypeError(f"{w} must be a (host_port, guest_port[, protocol]) tuple or a dict, not {p!r:.60}")
        o: Dict[str, Any] = {"guest_port": check_optional_int(d.get("guest_port"), f"{w} guest_port")}
        if o["guest_port"] is None:
            raise TypeError(f"{w} needs a guest_port")
        hp = check_optional_int(d.get("host_port"), f"{w} host_port")
        o["host_port"] = hp or 0
        for key in ("protocol", "host_ip"):
            if d.get(key) is not None:
                o[key] = check_str(d[key], f"{w} {key}")
        out.append(o)
    return out


@dataclass(frozen=True)
class PortMapping:
    """A published port: host_ip:host_port on the host reaches guest_port
    in the box (as bound while it runs: host port 0 resolved)."""

    host_port: int
    guest_port: int
    protocol: str = "tcp"
    host_ip: str = "127.0.0.1"

    @classmethod
    def _from_json(cls, p: Dict[str, Any]) -> "PortMapping":
        return cls(host_port=p.get("host_port", 0), guest_port=p.get("guest_port", 0),
                   protocol=p.get("protocol", "tcp"), host_ip=p.get("host_ip", "127.0.0.1"))


@dataclass(frozen=True)
class OutboundNetworkInfo:
    mode: str = "enabled"
    allow_net: Tuple[str, ...] = ()


@dataclass(frozen=True)
class InboundNetworkInfo:
    mode: str = "enabled"
    allow_net: Tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkInfo:
    """A box's network (``BoxInfo.network``): BoxLite's ``outbound``,
    ``inbound`` and ``published_ports`` (``mode`` and ``allow_net`` mirror
    the outbound's), and while it runs with a NIC its ``guest_ip``,
    ``gateway_ip`` and ``ports`` as bound (empty otherwise)."""

    outbound: OutboundNetworkInfo = OutboundNetworkInfo()
    inbound: InboundNetworkInfo = InboundNetworkInfo()
    published_ports: Tuple[PortMapping, ...] = ()
    guest_ip: str = ""
    gateway_ip: str = ""
    ports: Tuple[PortMapping, ...] = ()

    @property
    def mode(self) -> str:
        return self.outbound.mode

    @property
    def allow_net(self) -> Tuple[str, ...]:
        return self.outbound.allow_net

    @classmethod
    def from_json(cls, d: Dict[str, Any], running: Optional[Dict[str, Any]] = None) -> "NetworkInfo":
        out, inb, run = d.get("outbound") or {}, d.get("inbound") or {}, running or {}
        return cls(outbound=OutboundNetworkInfo(out.get("mode", "enabled"), tuple(out.get("allow_net") or ())),
                   inbound=InboundNetworkInfo(inb.get("mode", "enabled"), tuple(inb.get("allow_net") or ())),
                   published_ports=tuple(PortMapping._from_json(p) for p in d.get("published_ports") or ()),
                   guest_ip=run.get("guest_ip", ""), gateway_ip=run.get("gateway_ip", ""),
                   ports=tuple(PortMapping._from_json(p) for p in run.get("ports") or ()))


# ---- tunnels ------------------------------------------------------------------------------


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
        self._closed = False
        self._addr = SocketAddress._from_json(json.loads(raw.forwarder_local_addr(handle)))

    def local_addr(self) -> SocketAddress:
        return self._addr

    async def wait(self) -> None:
        while not await blocking(raw.forwarder_wait, self._h, 1000):
            pass

    async def close(self) -> None:
        """Stops listening (a Unix socket's file is removed) and ends its connections;
        the handle stays valid for wait() and local_addr()."""
        if not self._closed:
            self._closed = True
            await blocking(raw.forwarder_close, self._h)

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

    async def update_outbound(self, spec: OutboundNetworkSpec) -> None:
        """Replace where the box may connect: a running box's network stack
        enforces it at once for new connections and names (open ones are
        kept); the box keeps it across restarts. "enabled" with an empty
        allow_net clears restrictions; "disabled" allows nothing."""
        d = _direction(spec, OutboundNetworkSpec, "update_outbound spec")
        await blocking(raw.box_update_outbound, self._box()._handle(), json.dumps(d))

    async def update_inbound(self, spec: InboundNetworkSpec) -> None:
        """Replace the inbound mode (kept and reported; a local box has no
        public side); a non-empty allow_net raises UnsupportedError."""
        d = _direction(spec, InboundNetworkSpec, "update_inbound spec")
        await blocking(raw.box_update_inbound, self._box()._handle(), json.dumps(d))

    async def revoke_tunnel(self, port: int) -> None:
        """BoxLite withdraws a port's public access; a local box has none to
        withdraw, so this checks the port and does nothing (open connections
        and forwarders are not closed, as in BoxLite)."""
        _check_port(port)

    def __repr__(self) -> str:
        return "NetworkHandle()"
