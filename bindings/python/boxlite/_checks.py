"""Argument checking and the C ABI's JSON for every entry point: types are
checked here, values by the library (one place, whatever the binding)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _defaults
from .errors import InvalidArgumentError

# ---- argument checking (one place for every entry point) ------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_str(value: Any, what: str, *, allow_empty: bool = False) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if not allow_empty and value == "":
        raise InvalidArgumentError(f"{what} is empty")
    if "\x00" in value:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    return value


def check_optional_str(value: Any, what: str) -> Optional[str]:
    return None if value is None else check_str(value, what)


def check_optional_int(value: Any, what: str) -> Optional[int]:
    if value is None:
        return None
    if not _is_int(value):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    return value


DEFAULT_OUTPUT_LIMIT = _defaults.DEFAULT_OUTPUT_LIMIT_BYTES  # bytes collected per stream, as the library's default
_MAX_OUTPUT_LIMIT = (1 << 63) - 1


def check_output_limit(value: Any, what: str = "output_limit_bytes") -> Optional[int]:
    """None (the default) or a number of bytes > 0."""
    if value is None:
        return None
    if not _is_int(value):
        raise TypeError(f"{what} must be int (bytes), not {type(value).__name__}")
    if not 0 < value <= _MAX_OUTPUT_LIMIT:
        raise InvalidArgumentError(f"{what} must be > 0, not {value}")
    return value


def check_timeout(value: Any, what: str = "timeout") -> Optional[float]:
    """None or a number of seconds (0 means none). Its range is the
    library's to check (a negative value is its InvalidArgumentError naming
    the field); NaN and infinities are refused here because JSON has no
    such numbers."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgumentError(f"{what} must be a finite number of seconds, not {value!r}")
    return float(value)


def check_volumes(volumes: Any, what: str) -> List[Dict[str, Any]]:
    """BoxLite's volumes: (host_path, guest_path[, read_only]) tuples, where
    read_only is a bool or "ro" / "rw" (both spellings are BoxLite's), or
    dicts with host_path (or host), guest_path (or guest) and read_only (or
    ro); read-write unless said otherwise."""
    if volumes is None:
        return []
    if isinstance(volumes, (str, bytes, Mapping)) or not isinstance(volumes, (list, tuple)):
        raise TypeError(f"{what} must be a list of (host_path, guest_path[, read_only]) tuples, not {type(volumes).__name__}")
    out: List[Dict[str, Any]] = []
    for i, v in enumerate(volumes):
        where = f"{what}[{i}]"
        if isinstance(v, Mapping):
            unknown = set(v) - {"host", "host_path", "guest", "guest_path", "read_only", "ro"}
            if unknown:
                raise TypeError(f"{where} has unknown keys {sorted(unknown)}")
            host, guest = v.get("host_path", v.get("host")), v.get("guest_path", v.get("guest"))
            mode = v.get("read_only", v.get("ro", False))
        elif isinstance(v, (tuple, list)) and len(v) in (2, 3):
            host, guest = v[0], v[1]
            mode = v[2] if len(v) == 3 else False
        else:
            raise TypeError(f"{where} must be a (host_path, guest_path[, read_only]) tuple, not {v!r:.60}")
        if isinstance(mode, bool):
            read_only = mode
        elif mode in ("ro", "rw"):
            read_only = mode == "ro"
        else:
            raise InvalidArgumentError(f"{where} read_only must be a bool or 'ro' / 'rw', not {mode!r:.20}")
        out.append({"host_path": check_str(host, f"{where} host_path"),
                    "guest_path": check_str(guest, f"{where} guest_path"), "read_only": read_only})
    return out


def check_env_pairs(env: Any, what: str) -> Dict[str, str]:
    """A list of (key, value) tuples, as BoxOptions takes them."""
    if env is None:
        return {}
    if isinstance(env, Mapping) or isinstance(env, (str, bytes)) or not isinstance(env, (list, tuple)):
        raise TypeError(
            f"{what} must be a list of (key, value) tuples, not {type(env).__name__}"
            + (" (exec() takes a dict; BoxOptions env takes [(key, value), ...])" if isinstance(env, Mapping) else "")
        )
    out: Dict[str, str] = {}
    for i, kv in enumerate(env):
        if not isinstance(kv, (tuple, list)) or len(kv) != 2:
            raise TypeError(f"{what}[{i}] must be a (key, value) tuple, not {kv!r:.60}")
        k, v = kv
        out[_env_key(k, f"{what}[{i}] key")] = check_str(v, f"{what}[{i}] value", allow_empty=True)
    return out


def check_env_dict(env: Any, what: str) -> Dict[str, str]:
    """A dict of str to str, as exec() takes it."""
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise TypeError(
            f"{what} must be a dict of str to str, not {type(env).__name__}"
            + (" (BoxOptions env takes [(key, value), ...]; exec() takes a dict)" if isinstance(env, (list, tuple)) else "")
        )
    return {_env_key(k, f"{what} key"): check_str(v, f"{what}[{k!r}]", allow_empty=True) for k, v in env.items()}


def _env_key(k: Any, what: str) -> str:
    k = check_str(k, what)
    if "=" in k:
        raise InvalidArgumentError(f"{what} {k!r} contains '='")
    return k


def command_json(
    argv: Sequence[str],
    *,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[str] = None,
    user: Optional[str] = None,
    timeout: Optional[float] = None,
    stdin: bool = False,
    tty: bool = False,
    rows: Optional[int] = None,
    cols: Optional[int] = None,
    output_limit_bytes: Optional[int] = None,
) -> str:
    cmd: Dict[str, Any] = {"argv": list(argv)}
    if env:
        cmd["env"] = env
    if cwd:
        cmd["cwd"] = cwd
    if user:
        cmd["user"] = user
    if timeout:
        cmd["timeout_secs"] = timeout
    if stdin:
        cmd["stdin"] = True
    if tty:
        cmd["tty"] = True
    if rows is not None:
        cmd["rows"] = rows
    if cols is not None:
        cmd["cols"] = cols
    if output_limit_bytes is not None:
        cmd["output_limit_bytes"] = output_limit_bytes  # absent: the runtime's
    return json.dumps(cmd)


def check_argv(cmd: Any, args: Sequence[Any]) -> List[str]:
    argv = [check_str(cmd, "cmd")]
    for i, a in enumerate(args):
        argv.append(check_str(a, f"args[{i}]", allow_empty=True))
    return argv


# ---- network ------------------------------------------------------------------------
