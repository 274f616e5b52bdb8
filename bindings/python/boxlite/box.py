"""Boxes: options, info, and the Box handle."""

from __future__ import annotations

import json
import os
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import _copy
from . import _ffi as raw
from ._aio import blocking
from .advanced import AdvancedBoxOptions, HealthStatus, advanced_json
from .secret import SecretInfo, secrets_json
from ._checks import (check_argv, check_env_dict, check_env_pairs, check_optional_int, check_optional_str,
                      check_output_limit, check_str, check_timeout, check_volumes, command_json)
from .errors import ClosedError, InvalidArgumentError, UnsupportedError
from .exec import ExecResult
from .execution import Execution
from .metrics import BoxMetrics
from .network import NetworkInfo, NetworkSpec, PortMapping, network_json, ports_json
from .snapshot import CloneOptions, ExportOptions, SnapshotHandle, clone_options_json, fork_box

if TYPE_CHECKING:
    from .network import BoxTunnel, NetworkHandle
    from .runtime import Boxlite

__all__ = ["Box", "BoxOptions", "BoxInfo", "BoxStateInfo", "NetworkSpec", "NetworkInfo", "PortMapping"]


# ---- options and info ----------------------------------------------------------------


@dataclass
class BoxOptions:
    """How to create a box (``Boxlite.create``). Unset fields take the
    library's defaults: 1 CPU, 512 MiB, a 4 GB disk, the image's working dir,
    user and env. ``auto_remove`` (default ``_defaults.DEFAULT_AUTO_REMOVE``: True, as in BoxLite) deletes the box
    and its disk when it stops (never while it is only configured).
    ``detach=True`` lets the box outlive this process: closing the runtime or
    exiting leaves it running, and any process reattaches with
    ``Boxlite.get(id or name)`` to the same VM (a detached auto-remove box is
    deleted whenever it stops, by whoever stops it). ``entrypoint`` and
    ``cmd`` (lists of str) override the image's ENTRYPOINT and CMD (an
    entrypoint drops the image's CMD, as docker's does): they are what
    ``boxlite run IMAGE`` with no command, or a C exec with an empty argv,
    runs; boxes have no main process of their own. ``network`` is a NetworkSpec or "enabled" /
    "disabled" (default enabled); ``ports`` publishes box ports on the host's
    127.0.0.1: ``[(host_port, guest_port), (host_port, guest_port, "udp")]``,
    host_port 0 or None picking a free one (``BoxInfo.ports`` shows it), or
    dicts with host_port, guest_port, protocol, host_ip."""

    image: Optional[str] = None
    rootfs_path: Optional[str] = None
    cpus: Optional[int] = None
    memory_mib: Optional[int] = None
    disk_size_gb: Optional[int] = None
    working_dir: Optional[str] = None
    env: List[Tuple[str, str]] = field(default_factory=list)
    # (host_path, guest_path[, read_only: bool | "ro" | "rw"]) or dicts: host folders or files in the box.
    volumes: List[Any] = field(default_factory=list)
    network: Union[NetworkSpec, str, None] = None
    ports: List[Any] = field(default_factory=list)
    auto_remove: Optional[bool] = None
    # BoxLite 0.10's auto_delete: 0 keeps the box after stop, above 0 deletes
    # it at stop (a local runtime deletes at stop whatever the number); it
    # takes precedence over auto_remove. None: auto_remove decides.
    auto_delete: Optional[int] = None
    detach: Optional[bool] = None
    entrypoint: Optional[List[str]] = None
    cmd: Optional[List[str]] = None
    user: Optional[str] = None
    name: Optional[str] = None
    boot_timeout: Optional[float] = None
    # The box's hostname (default "boxlite", as BoxLite's).
    hostname: Optional[str] = None
    # Sessions a box started from a template finds started: "python" and/or
    # "shell" ("shell:/bin/bash" for another shell). Its first default
    # session of that kind takes over an interpreter the template VM
    # started. CodeBox asks for "python", InteractiveBox for its shell.
    prestart: Optional[List[str]] = None
    # Idle seconds after which the box pauses itself (README); None/0: never.
    auto_pause_secs: Optional[float] = None
    # Credentials the box uses without holding them (boxlite.Secret).
    secrets: List[Any] = field(default_factory=list)
    # BoxLite's AdvancedBoxOptions: capabilities, security, health_check.
    advanced: Optional[AdvancedBoxOptions] = None

    def to_json(self, name: Optional[str] = None, what: str = "BoxOptions.", image_required: bool = True) -> str:
        """The options as the C ABI's JSON; raises TypeError /
        InvalidArgumentError / UnsupportedError for what cannot be honoured
        (``what`` prefixes the parameter names in messages). An import's
        options (``image_required=False``) have no image."""
        if self.rootfs_path:
            raise UnsupportedError(f"{what}rootfs_path is not supported yet")
        if self.image is None and image_required:
            raise InvalidArgumentError(f"{what}image is required (e.g. 'alpine:latest')")
        o: Dict[str, Any] = {}
        if self.image is not None:
            o["image"] = check_str(self.image, f"{what}image")
        name = self.name if name is None else name
        if name is not None:
            o["name"] = check_str(name, "name")
        for key in ("cpus", "memory_mib", "disk_size_gb"):
            v = check_optional_int(getattr(self, key), f"{what}{key}")
            if v is not None:
                o[key] = v
        env = check_env_pairs(self.env, f"{what}env")
        if env:
            o["env"] = env
        if self.working_dir is not None:
            o["working_dir"] = check_str(self.working_dir, f"{what}working_dir")
        if self.user is not None:
            o["user"] = check_str(self.user, f"{what}user")
        if self.hostname is not None:
            o["hostname"] = check_str(self.hostname, f"{what}hostname")
        if self.prestart is not None:
            if isinstance(self.prestart, (str, bytes)) or not isinstance(self.prestart, (list, tuple)):
                raise TypeError(f"{what}prestart must be a list of str, not {type(self.prestart).__name__}")
            o["prestart"] = [check_str(k, f"{what}prestart[{i}]") for i, k in enumerate(self.prestart)]
        volumes = check_volumes(self.volumes, f"{what}volumes")
        if volumes:
            o["volumes"] = volumes
        t = check_timeout(self.boot_timeout, f"{what}boot_timeout")
        if t is not None:  # the library refuses 0, as every binding does
            o["boot_timeout_secs"] = t
        t = check_timeout(self.auto_pause_secs, f"{what}auto_pause_secs")
        if t is not None:
            o["auto_pause_secs"] = t
        if self.auto_remove is not None:  # unset: the library's DEFAULT_AUTO_REMOVE
            if not isinstance(self.auto_remove, bool):
                raise TypeError(f"{what}auto_remove must be bool, not {type(self.auto_remove).__name__}")
            o["auto_remove"] = self.auto_remove
        if self.auto_delete is not None:
            n = check_optional_int(self.auto_delete, f"{what}auto_delete")
            if n < 0:
                raise InvalidArgumentError(f"{what}auto_delete must be >= 0 (0 keeps the box after stop), not {n}")
            o["auto_remove"] = n > 0
        if self.detach is not None:
            if not isinstance(self.detach, bool):
                raise TypeError(f"{what}detach must be bool, not {type(self.detach).__name__}")
            o["detach"] = self.detach
        for key in ("entrypoint", "cmd"):
            v = getattr(self, key)
            if v is not None:
                if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
                    raise TypeError(f"{what}{key} must be a list of str, not {type(v).__name__}")
                o[key] = [check_str(a, f"{what}{key}[{i}]", allow_empty=i > 0) for i, a in enumerate(v)]
        network = network_json(self.network, f"{what}network")
        if network is not None:
            o["network"] = network
        ports = ports_json(self.ports, f"{what}ports")
        if ports:
            o["ports"] = ports
        secrets = secrets_json(self.secrets, f"{what}secrets")
        if secrets:
            o["secrets"] = secrets
        advanced = advanced_json(self.advanced, f"{what}advanced")
        if advanced is not None:
            o["advanced"] = advanced
        return json.dumps(o)


@dataclass(frozen=True)
class BoxStateInfo:
    status: str  # "configured", "starting", "running", "paused", "stopping", "stopped", "removed"
    running: bool
    pid: Optional[int] = None  # the VMM's pid while running
    # BoxLite's exit code of the box's main command. Boxes here run no main
    # command of their own (exec runs each command; its ExecResult has the
    # code), so it is always None; last_exit says why a box stopped.
    exit_code: Optional[int] = None


class BoxInfo:
    """What a box reports about itself (``Box.info()``, ``Boxlite.list_info()``).

    ``await box.info()`` works too, for programs that treat it as async."""

    def __init__(self, data: Dict[str, Any]):
        self.raw = data
        cfg = data.get("config") or {}
        rt = data.get("runtime") or {}
        status = data.get("state", "unknown")
        self.id: str = data.get("id", "")
        self.name: Optional[str] = data.get("name") or None
        self.image: str = data.get("image", "")
        self.state = BoxStateInfo(status=status, running=status == "running", pid=rt.get("vmm_pid") or None)
        self.created_at: str = data.get("created_at", "")
        self.cpus: int = cfg.get("cpus", 0)
        self.memory_mib: int = cfg.get("memory_mib", 0)
        self.disk_size_gb: int = cfg.get("disk_size_gb", 0)
        self.working_dir: Optional[str] = cfg.get("working_dir") or None
        self.hostname: str = cfg.get("hostname") or "boxlite"
        self.prestart: List[str] = list(cfg.get("prestart") or [])
        self.auto_remove: bool = bool(cfg.get("auto_remove"))
        # BoxLite 0.10's view of it: 1 (deleted at stop) or 0 (kept).
        self.auto_delete: int = 1 if self.auto_remove else 0
        # RFC 3339: when the VM became ready, and the later of that and the
        # last exec, copy or session call this process saw (None unless running).
        self.started_at: Optional[str] = rt.get("started_at") or None
        self.last_activity_at: Optional[str] = rt.get("last_activity_at") or None
        self.last_exit: Optional[str] = data.get("last_exit") or None
        # The last run ended in a fault (a crashed VM): exec does not start it again, start() does.
        self.faulted: bool = bool(data.get("faulted"))
        # BoxLite's: the health check's state (state none without one, or when not running).
        self.health_status = HealthStatus(data.get("health_status"))
        self.accel: Optional[str] = rt.get("accel")
        self.accel_reason: Optional[str] = rt.get("accel_reason")
        self.kernel: Optional[str] = rt.get("kernel")
        self.boot_ms: Optional[float] = rt.get("boot_ms")
        # How the VM came up: "template" (a warm start), "new-template" (this
        # box made its shape's template first) or "boot"; start_note says why
        # a box that could have started warm booted.
        self.start: Optional[str] = rt.get("start") or None
        self.start_note: Optional[str] = rt.get("start_note") or None
        # What weakens the box's isolation (TCG, a missing VMM confinement
        # layer); see docs/SECURITY.md.
        self.warnings: List[str] = list(rt.get("warnings") or [])
        # The network policy (BoxLite's outbound, inbound, published_ports;
        # update_outbound changes it) with, while the box runs with a NIC,
        # its addresses and the published ports as bound.
        self.network: NetworkInfo = NetworkInfo.from_json(data.get("network") or {}, rt.get("network"))
        self.network_mode: str = self.network.mode
        # The box's secrets: names, hosts and placeholders, never the values.
        self.secrets: List[SecretInfo] = [SecretInfo.from_json(o) for o in cfg.get("secrets") or []]

    @property
    def ports(self) -> List[PortMapping]:
        """The published ports as bound; empty when the box is not running."""
        return list(self.network.ports)

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def pid(self) -> Optional[int]:
        return self.state.pid

    def __await__(self):
        if False:  # pragma: no cover - makes this a generator
            yield
        return self

    def __repr__(self) -> str:
        return f"BoxInfo(id={self.id!r}, name={self.name!r}, image={self.image!r}, status={self.status!r})"


# ---- the box handle ------------------------------------------------------------------------


_Bx = TypeVar("_Bx", bound="Box")  # `with` gives back the subclass


class Box:
    """A handle on a box (from ``Boxlite.create`` or ``Boxlite.get``).

    ``close()`` releases the handle (and the executions started through it);
    the box keeps running until ``stop()``, the runtime's close, or the end of
    the process. ``async with box:`` starts it if stopped and stops it (and,
    with auto_remove, deletes it) on exit."""

    def __init__(self, runtime: "Boxlite", handle: raw.Handle):
        self._runtime = runtime
        self._h = handle
        self._id = raw.box_id(handle) or ""
        self._executions: "weakref.WeakSet[Execution]" = weakref.WeakSet()

    # ---- identity and info ----

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> Optional[str]:
        return self.info().name

    @property
    def closed(self) -> bool:
        return not self._h.alive

    def info(self) -> BoxInfo:
        return BoxInfo(json.loads(raw.box_info(self._handle())))

    # ---- lifecycle ----

    async def start(self) -> None:
        """Boots a configured or stopped box (its disk keeps what earlier runs
        wrote); a running box is left as it is. ``exec``, ``run``, copies and
        sessions start a configured or stopped box themselves, except one
        whose last run ended in a fault (a crashed VM): that one raises
        InvalidStateError naming the fault until started here."""
        await blocking(raw.box_start, self._handle())

    async def _start_if_resting(self) -> None:
        """Starts a configured or stopped box in a worker thread: exec is a
        non-blocking C call, which would otherwise boot the box on the event
        loop. A faulted box is left to exec, which says why it stopped."""
        info = self.info()
        if info.status in ("configured", "paused") or (info.status == "stopped" and not info.faulted):
            await self.start()

    async def stop(self) -> None:
        """Shuts the box down; with auto_remove it is deleted too. Stopping a
        stopped box does nothing."""
        await blocking(raw.box_stop, self._handle())

    async def pause(self) -> Dict[str, Any]:
        """Saves the running box with its memory and ends its processes (README:
        "Pause and resume"); returns ``{"saved_at", "state_bytes", "save_ms"}``."""
        return json.loads(await blocking(raw.box_pause, self._handle()) or "{}")

    async def resume(self) -> None:
        """Restores a paused box as the same machine; exec, run, copies and
        sessions resume it themselves."""
        await blocking(raw.box_resume, self._handle())

    async def remove(self, force: bool = False) -> None:
        """Deletes the box and its disk; a running box needs force=True."""
        if not isinstance(force, bool):
            raise TypeError(f"force must be bool, not {type(force).__name__}")
        await blocking(raw.box_remove, self._handle(), force)

    async def metrics(self) -> BoxMetrics:
        """The running box's counters and samples (see ``BoxMetrics``); a box
        that is not running raises InvalidStateError."""
        return BoxMetrics(json.loads(await blocking(raw.box_metrics, self._handle())))

    # ---- tunnels (network.py) ----

    @property
    def network(self) -> "NetworkHandle":
        """Tunnels to ports in the box: ``await (await box.network.tunnel(8000)).connect()``."""
        from .network import NetworkHandle

        return NetworkHandle(lambda: self)

    async def tunnel(self, port: int) -> "BoxTunnel":
        """Prepare a one-shot tunnel to a TCP port inside the box (``box.network.tunnel``)."""
        return await self.network.tunnel(port)

    # ---- snapshots, clones, archives (snapshot.py) ----

    @property
    def snapshot(self) -> "SnapshotHandle":
        """Snapshots of the box's disk: ``await box.snapshot.create("name")``, ..."""
        return SnapshotHandle(self)

    async def clone_box(self, *, options: Optional["CloneOptions"] = None, name: Optional[str] = None) -> "Box":
        """A new, stopped box with this box's config, image and a copy of its
        disk (or of the snapshot ``options.snapshot``; a memory snapshot's
        clone is paused at its instant, a fork of it). A running box's disk is
        saved at one instant (synced, the VM stopped only for the copy)."""
        from .runtime import _discard_box  # (runtime imports this module)

        opts = clone_options_json(options, name)
        h = await blocking(raw.box_clone, self._handle(), opts, on_abandon=_discard_box)
        return self._runtime._adopt(h)

    async def fork(self, count: int = 1, names: Optional[Sequence[str]] = None) -> List["Box"]:
        """``count`` running copies of this running box (see ``snapshot.fork_box``)."""
        return await fork_box(self, count, names)

    async def export(self, *, dest: Any, options: Optional["ExportOptions"] = None) -> str:
        """Writes the box (a running one's disk saved at one instant) to one archive: its config, its disk
        (sparse) and its image. ``dest`` is a file, or a directory in which the
        archive is ``<name or id>.boxlite``. Returns the archive's path."""
        if options is not None and not isinstance(options, ExportOptions):
            raise TypeError(f"options must be boxlite.ExportOptions, not {type(options).__name__}")
        return await blocking(raw.box_export, self._handle(), check_str(dest, "dest"))

    def close(self) -> None:
        """Releases the handle and closes its executions. Idempotent."""
        for ex in list(self._executions):
            ex.close()
        self._h.close()

    async def __aenter__(self: _Bx) -> _Bx:
        if self.info().status != "running":
            await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            if self._h.alive and self.info().status in ("running", "starting"):
                await self.stop()
        finally:
            self.close()

    # ---- processes ----

    async def exec(
        self,
        cmd: str,
        *argv: Any,
        args: Optional[Sequence[str]] = None,
        env: Any = None,
        tty: bool = False,
        user: Optional[str] = None,
        timeout_secs: Optional[float] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        stdin: bool = True,
        rows: Optional[int] = None,
        cols: Optional[int] = None,
        output_limit_bytes: Optional[int] = None,
    ) -> Execution:
        """Starts ``cmd`` with ``args`` (never joined into a shell string) and
        returns its streaming Execution.

        BoxLite's call styles all work: ``exec("ls", "-l", "/")``,
        ``exec("ls", ["-l", "/"], [("K", "V")])`` (args as a list, then env as a
        list of pairs) and ``exec("ls", args=["-l"], env=...)``. ``env`` is a
        dict (or a list of pairs). ``stdin=True``
        keeps the process's stdin open for ``execution.stdin()``; ``wait()``
        closes it if it was never taken. ``tty=True`` runs the process on a
        terminal of ``rows`` x ``cols`` (default 24 x 80): stdout carries the
        terminal's output (stderr included), stdin types into it (closing it
        types ^D) and ``resize_tty()`` changes its size. A command that does
        not exist raises NotFoundError here or from ``wait()``.

        Output is streamed, so nothing is capped while it is read; but while
        ``wait()`` is awaited, output nobody reads is held only up to
        ``output_limit_bytes`` per stream (default: the runtime's, 64 MiB):
        the rest of that stream is read and dropped, and
        ``execution.stdout_truncated`` / ``stderr_truncated`` say so."""
        if args is not None:
            if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
                raise TypeError(f"args must be a list of str, not {type(args).__name__}")
            if argv:
                raise TypeError("exec() got arguments both positionally and as args=")
            argv = (list(args),)
        argv, env = _split_exec_args(cmd, argv, env)
        if not isinstance(tty, bool):
            raise TypeError(f"tty must be bool, not {type(tty).__name__}")
        if (rows is not None or cols is not None) and not tty:
            raise InvalidArgumentError("exec: rows and cols need tty=True")
        rows = check_optional_int(rows, "rows")
        cols = check_optional_int(cols, "cols")
        t = check_timeout(timeout_secs if timeout_secs is not None else timeout)
        cmd_json = command_json(
            argv,
            env=env,
            cwd=check_optional_str(cwd, "cwd"),
            user=check_optional_str(user, "user"),
            timeout=t,
            stdin=bool(stdin),
            tty=tty,
            rows=rows,
            cols=cols,
        )
        limit = check_output_limit(output_limit_bytes) or self._runtime.output_limit_bytes
        await self._start_if_resting()
        h = raw.box_exec(self._handle(), cmd_json)
        try:
            ex = Execution(self, h, argv, bool(stdin), output_limit_bytes=limit)
        except BaseException:
            h.close()
            raise
        self._executions.add(ex)
        return ex

    async def run(
        self,
        cmd: str,
        *args: Any,
        env: Optional[Mapping[str, str]] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        output_limit_bytes: Optional[int] = None,
    ) -> ExecResult:
        """Runs a command to completion in one library call (boxlite_box_run,
        in a worker thread) and returns its ExecResult (``timed_out`` set when
        its timeout killed it). The library collects at most
        ``output_limit_bytes`` per stream (default: the runtime's, 64 MiB),
        reading and dropping the rest: ``stdout_truncated`` /
        ``stderr_truncated`` then say so. For all of a large output use
        exec()."""
        argv = check_argv(cmd, args)
        cmd_json = command_json(
            argv,
            env=check_env_dict(env, "env"),
            cwd=check_optional_str(cwd, "cwd"),
            user=check_optional_str(user, "user"),
            timeout=check_timeout(timeout),
            output_limit_bytes=check_output_limit(output_limit_bytes),
        )
        (code, sig, timed_out), out, err, (out_cut, err_cut) = await blocking(raw.box_run, self._handle(), cmd_json)
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            error_message=f"exec {' '.join(argv)}: timed out" if timed_out else None,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    # ---- internals ----

    # ---- files ----

    async def copy_in(self, host_path: Any, container_dest: str, copy_options: Optional[_copy.CopyOptions] = None,
                      **kwargs: Any) -> None:
        """Copies a host file or directory into the box, as BoxLite 0.10
        does: a directory lands inside ``container_dest`` under its own name,
        ``container_dest`` made if missing (``copy_in("/src/data", "/app")``
        gives ``/app/data/...``); a file lands inside ``container_dest`` if
        that is a directory (or ends in "/"), else at that path; a source
        ending in "/." copies a directory's contents into ``container_dest``.
        ``layout="docker"`` makes a missing destination the copy itself, as
        docker cp does (CopyOptions.layout). Box paths resolve as in the box. Modes, mtimes
        and symlinks are kept; the files belong to root in the box. No tar
        or shell is needed in the image. Options: ``copy_options``
        (CopyOptions) or its fields as keywords."""
        o = _copy.options(copy_options, kwargs)
        src = _copy.host_path(host_path, "host_path")
        dst = _copy.box_path(container_dest, "container_dest")
        if not os.path.lexists(src):
            raise FileNotFoundError(f"copy_in: {src}: no such file or directory")
        await blocking(raw.box_copy_in, self._handle(), src, dst, o.to_json())

    async def copy_out(self, container_src: str, host_dest: Any, copy_options: Optional[_copy.CopyOptions] = None,
                       **kwargs: Any) -> None:
        """Copies a box file or directory to the host, as BoxLite 0.10
        does: a directory lands inside ``host_dest`` under its own name,
        ``host_dest`` made if missing (``copy_out("/app", out)`` gives
        ``out/app/...``); a file inside ``host_dest`` if that is a directory,
        else at that path (``layout="docker"``: docker cp's rules). Raises NotFoundError when the source does not exist.

        What the box sends is treated as hostile: nothing is written outside
        ``host_dest`` or through a symlink (one already there or one the copy
        brought); the box's symlinks arrive as symlinks, hard links only
        within the copy; device nodes and FIFOs are not created; files
        belong to the calling user, without set-id bits. ``max_bytes``
        (default 1 GiB of file data) and ``max_entries`` (default 100,000)
        cap the copy (LimitError). A copy to a new path is renamed into
        place only when complete, so an error leaves nothing; a copy merged
        into an existing directory leaves what it wrote so far, and the
        error says so."""
        o = _copy.options(copy_options, kwargs)
        src = _copy.box_path(container_src, "container_src")
        dst = _copy.host_path(host_dest, "host_dest")
        await blocking(raw.box_copy_out, self._handle(), src, dst, o.to_json())

    def _handle(self) -> raw.Handle:
        if not self._h.alive:
            raise ClosedError(f"box {self._id} handle is closed")
        return self._h

    def __repr__(self) -> str:
        return f"Box(id={self._id!r}{', closed' if self.closed else ''})"


def _split_exec_args(cmd: Any, args: Sequence[Any], env: Any) -> Tuple[List[str], Dict[str, str]]:
    """Normalizes exec's two call styles into argv and an env dict."""
    args = list(args)
    if args and (args[0] is None or isinstance(args[0], (list, tuple))):
        # BoxLite's native style: exec(cmd, [args], [env pairs])
        if len(args) > 2:
            raise TypeError("exec(cmd, args_list, env) takes at most 3 positional arguments")
        arg_list = list(args[0] or [])
        if len(args) == 2:
            if env is not None:
                raise TypeError("exec() got env both positionally and as a keyword")
            env = args[1]
        args = arg_list
    argv = check_argv(cmd, args)
    if env is None or isinstance(env, Mapping):
        envd = check_env_dict(env, "env")
    else:
        envd = check_env_pairs(env, "env")
    return argv, envd
