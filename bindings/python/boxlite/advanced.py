"""BoxLite 0.10's AdvancedBoxOptions: capabilities, security presets and
health checks (docs/security-options.md says what each setting changes)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._checks import _is_int, check_str, check_timeout
from ._defaults import (DEFAULT_HEALTH_INTERVAL_SECS, DEFAULT_HEALTH_RETRIES, DEFAULT_HEALTH_START_PERIOD_SECS,
                        DEFAULT_HEALTH_TIMEOUT_SECS, SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES, SECURITY_MAXIMUM_MAX_OPEN_FILES,
                        SECURITY_MAXIMUM_MAX_PROCESSES)
from .errors import InvalidArgumentError

__all__ = ["AdvancedBoxOptions", "ContainerCapabilities", "SecurityOptions", "HealthCheckOptions", "HealthState",
           "HealthStatus"]


def _names(v: Any, what: str) -> List[str]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise TypeError(f"{what} must be a list of str, not {type(v).__name__}")
    return [check_str(n, f"{what}[{i}]") for i, n in enumerate(v)]


@dataclass
class ContainerCapabilities:
    """Linux capabilities added to the box processes' default set (docker's
    without MKNOD), then dropped. Names as Linux's, with or without ``CAP_``,
    any case; ``ALL`` is every one. An unknown name fails the box's creation
    with InvalidArgumentError naming it."""

    add: List[str] = field(default_factory=list)
    drop: List[str] = field(default_factory=list)

    def to_wire(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {}
        add, drop = _names(self.add, f"{what}.add"), _names(self.drop, f"{what}.drop")
        if add:
            o["add"] = add
        if drop:
            o["drop"] = drop
        return o


def _limit(v: Any, what: str) -> Optional[int]:
    if v is None:
        return None
    if not _is_int(v):
        raise TypeError(f"{what} must be int or None, not {type(v).__name__}")
    if v <= 0:
        raise InvalidArgumentError(f"{what} must be above 0 (None: no limit), not {v}")
    return int(v)


def _flag(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{what} must be bool, not {type(v).__name__}")
    return v


@dataclass
class SecurityOptions:
    """Isolation of a box (BoxLite's SecurityOptions). Here ``jailer_enabled``
    runs the box's VMM in the host jail; ``seccomp_enabled`` puts the box's
    processes under its seccomp filter; the ``max_*`` are resource limits of
    every process in the box (``max_processes`` does not bind root: Linux
    exempts it); ``network_enabled=False`` (macOS-only in BoxLite) is
    refused, use ``network="disabled"``; ``close_fds`` changes nothing (the
    shim and VMM always start with only their own descriptors). A box
    without security options gets ``standard()``, and a field left as None
    keeps ``standard()``'s value: ``SecurityOptions(max_open_files=10)``
    still has the jail and the filter."""

    jailer_enabled: Optional[bool] = None
    seccomp_enabled: Optional[bool] = None
    max_open_files: Optional[int] = None
    max_file_size: Optional[int] = None  # bytes
    max_processes: Optional[int] = None
    max_memory: Optional[int] = None  # bytes of address space
    max_cpu_time: Optional[int] = None  # seconds
    network_enabled: Optional[bool] = None
    close_fds: Optional[bool] = None

    @staticmethod
    def development() -> "SecurityOptions":
        """No host jail, no seccomp filter in the box: for debugging what
        isolation gets in the way of."""
        return SecurityOptions(jailer_enabled=False, seccomp_enabled=False, close_fds=False)

    @staticmethod
    def standard() -> "SecurityOptions":
        """The host jail and the box's seccomp filter: every box's default."""
        return SecurityOptions(jailer_enabled=True, seccomp_enabled=True)

    @staticmethod
    def maximum() -> "SecurityOptions":
        """standard(), and every box process limited to 1024 open files,
        1 GiB files and 100 processes (BoxLite's numbers)."""
        return SecurityOptions(jailer_enabled=True, seccomp_enabled=True, max_open_files=SECURITY_MAXIMUM_MAX_OPEN_FILES,
                               max_file_size=SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES,
                               max_processes=SECURITY_MAXIMUM_MAX_PROCESSES)

    def to_wire(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {}
        for key in ("jailer_enabled", "seccomp_enabled", "network_enabled", "close_fds"):
            if getattr(self, key) is not None:
                o[key] = _flag(getattr(self, key), f"{what}.{key}")
        for key, wire in (("max_open_files", "max_open_files"), ("max_file_size", "max_file_size_bytes"),
                          ("max_processes", "max_processes"), ("max_memory", "max_memory_bytes"),
                          ("max_cpu_time", "max_cpu_time_secs")):
            v = _limit(getattr(self, key), f"{what}.{key}")
            if v is not None:
                o[wire] = v
        return o


@dataclass
class HealthCheckOptions:
    """A health check (BoxLite's HealthCheckOptions), in seconds: every
    ``interval`` the box's shim runs ``command`` in the box (default
    ``["true"]``: the agent can start a process there) and gives it
    ``timeout`` to exit 0; failures in the first ``start_period`` do not
    count, ``retries`` in a row make the box unhealthy. ``command`` is this
    SDK's addition."""

    interval: float = DEFAULT_HEALTH_INTERVAL_SECS
    timeout: float = DEFAULT_HEALTH_TIMEOUT_SECS
    retries: int = DEFAULT_HEALTH_RETRIES
    start_period: float = DEFAULT_HEALTH_START_PERIOD_SECS
    command: Optional[List[str]] = None

    def to_wire(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {}
        for key in ("interval", "timeout"):
            t = check_timeout(getattr(self, key), f"{what}.{key}")
            if t is None:
                raise InvalidArgumentError(f"{what}.{key} must be a number of seconds above 0")
            o[key + "_secs"] = t
        o["start_period_secs"] = check_timeout(self.start_period, f"{what}.start_period") or 0
        if not _is_int(self.retries):
            raise TypeError(f"{what}.retries must be int, not {type(self.retries).__name__}")
        o["retries"] = self.retries
        if self.command is not None:
            o["command"] = _names(self.command, f"{what}.command")
        return o


@dataclass
class AdvancedBoxOptions:
    """Options for expert users (BoxLite's): ``BoxOptions(advanced=...)``.
    A box with capabilities or security options boots (no warm start)."""

    security: Optional[SecurityOptions] = None
    health_check: Optional[HealthCheckOptions] = None
    capabilities: Optional[ContainerCapabilities] = None

    def to_wire(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {}
        for key, cls in (("security", SecurityOptions), ("health_check", HealthCheckOptions),
                         ("capabilities", ContainerCapabilities)):
            v = getattr(self, key)
            if v is None:
                continue
            if not isinstance(v, cls):
                raise TypeError(f"{what}.{key} must be boxlite.{cls.__name__}, not {type(v).__name__}")
            o[key] = v.to_wire(f"{what}.{key}")
        return o


def advanced_json(v: Any, what: str) -> Optional[Dict[str, Any]]:
    """BoxOptions.advanced as the C ABI's JSON (None: absent)."""
    if v is None:
        return None
    if not isinstance(v, AdvancedBoxOptions):
        raise TypeError(f"{what} must be boxlite.AdvancedBoxOptions, not {type(v).__name__}")
    return v.to_wire(what) or None


class HealthState:
    """A box's health state (BoxLite's): ``none`` (no health check, or not
    running), ``starting``, ``healthy``, ``unhealthy``."""

    __slots__ = ("value",)
    _STATES = ("none", "starting", "healthy", "unhealthy")

    def __init__(self, value: str):
        if value not in self._STATES:
            raise InvalidArgumentError(f"health state {value!r}: want one of {', '.join(self._STATES)}")
        self.value = value

    @staticmethod
    def none() -> "HealthState":
        return HealthState("none")

    @staticmethod
    def starting() -> "HealthState":
        return HealthState("starting")

    @staticmethod
    def healthy() -> "HealthState":
        return HealthState("healthy")

    @staticmethod
    def unhealthy() -> "HealthState":
        return HealthState("unhealthy")

    def is_none(self) -> bool:
        return self.value == "none"

    def is_starting(self) -> bool:
        return self.value == "starting"

    def is_healthy(self) -> bool:
        return self.value == "healthy"

    def is_unhealthy(self) -> bool:
        return self.value == "unhealthy"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HealthState):
            return self.value == other.value
        if isinstance(other, str):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"<HealthState: {self.value}>"


class HealthStatus:
    """``BoxInfo.health_status``: the state, the failed checks in a row that
    counted, when the last check ended (RFC 3339, None before the first)
    and why it failed (this SDK's addition)."""

    def __init__(self, data: Optional[Dict[str, Any]]):
        data = data or {}
        self.state = HealthState(data.get("state") or "none")
        self.failures: int = int(data.get("failures") or 0)
        self.last_check: Optional[str] = data.get("last_check") or None
        self.last_error: Optional[str] = data.get("last_error") or None

    def __repr__(self) -> str:
        return f"HealthStatus(state={self.state}, failures={self.failures}, last_check={self.last_check!r})"
