"""BoxLite 0.10's AdvancedBoxOptions: the objects' shapes as BoxLite's, bad
options refused before anything boots (naming what is wrong), and one
program written as a BoxLite 0.10 user writes it (capabilities, a security
preset with limits, a health check) run in a process of its own against a
real alpine box."""

from __future__ import annotations

import subprocess
import sys

import pytest

import boxlite
from conftest import need_image, shim_children


def test_shapes():
    a = boxlite.AdvancedBoxOptions()
    assert (a.security, a.health_check, a.capabilities) == (None, None, None)
    c = boxlite.ContainerCapabilities(add=["NET_ADMIN"], drop=["CHOWN"])
    assert c.add == ["NET_ADMIN"] and boxlite.ContainerCapabilities().drop == []
    h = boxlite.HealthCheckOptions()
    assert (h.interval, h.timeout, h.retries, h.start_period) == (30, 10, 3, 60)
    dev, std, mx = (boxlite.SecurityOptions.development(), boxlite.SecurityOptions.standard(),
                    boxlite.SecurityOptions.maximum())
    assert (dev.jailer_enabled, dev.seccomp_enabled, dev.close_fds) == (False, False, False)
    assert (std.jailer_enabled, std.seccomp_enabled, std.max_open_files) == (True, True, None)
    assert (mx.max_open_files, mx.max_file_size, mx.max_processes, mx.max_memory) == (1024, 1 << 30, 100, None)
    s = boxlite.SecurityOptions.standard()
    s.max_open_files = 2048  # BoxLite's docs customise a preset so
    assert s.max_open_files == 2048
    st = boxlite.HealthState.healthy()
    assert st.is_healthy() and not st.is_none() and st.value == "healthy" and str(st) == "healthy"
    assert boxlite.HealthState.none() == "none" and repr(boxlite.HealthState.starting()) == "<HealthState: starting>"
    hs = boxlite.HealthStatus({"state": "unhealthy", "failures": 3, "last_check": "2026-12-07T00:00:00Z"})
    assert hs.state.is_unhealthy() and hs.failures == 3 and hs.last_check == "2026-12-07T00:00:00Z"
    assert boxlite.HealthStatus(None).state.is_none()


@pytest.mark.local_only("checks that nothing booted by counting this process's shims")
def test_bad_options_refused_before_boot(run):
    need_image("alpine:latest")
    before = shim_children()
    rt = boxlite.Boxlite.default()
    cases = [
        (boxlite.AdvancedBoxOptions(capabilities=boxlite.ContainerCapabilities(add=["NET_ADMN"])), boxlite.InvalidArgumentError, "NET_ADMN"),
        (boxlite.AdvancedBoxOptions(capabilities=boxlite.ContainerCapabilities(drop="CHOWN")), TypeError, "drop"),
        (boxlite.AdvancedBoxOptions(health_check=boxlite.HealthCheckOptions(retries=0)), boxlite.InvalidArgumentError, "retries"),
        (boxlite.AdvancedBoxOptions(health_check=boxlite.HealthCheckOptions(interval="5")), TypeError, "interval"),
        (boxlite.AdvancedBoxOptions(security=boxlite.SecurityOptions(network_enabled=False)), boxlite.UnsupportedError, "network_enabled"),
        (boxlite.AdvancedBoxOptions(security=boxlite.SecurityOptions(max_open_files=0)), boxlite.InvalidArgumentError, "max_open_files"),
        (boxlite.AdvancedBoxOptions(security="maximum"), TypeError, "security"),
        ({"capabilities": {"add": ["NET_ADMIN"]}}, TypeError, "advanced"),
    ]
    for adv, exc, word in cases:
        with pytest.raises(exc, match=word):
            run(rt.create(boxlite.BoxOptions(image="alpine:latest", advanced=adv)))
    with pytest.raises(TypeError, match="healthcheck"):
        boxlite.SimpleBox(image="alpine:latest", healthcheck=boxlite.HealthCheckOptions())
    assert shim_children() == before


# Written as BoxLite 0.10's docs write it; the box's own view is printed.
PROGRAM = '''
import asyncio
import boxlite
from boxlite import (AdvancedBoxOptions, BoxOptions, Boxlite, ContainerCapabilities, HealthCheckOptions,
                     SecurityOptions)


async def main():
    security = SecurityOptions.maximum()
    security.max_open_files = 333
    options = BoxOptions(
        image="alpine:latest",
        advanced=AdvancedBoxOptions(
            security=security,
            health_check=HealthCheckOptions(interval=1, timeout=5, retries=2, start_period=0),
            capabilities=ContainerCapabilities(add=["NET_ADMIN"], drop=["NET_RAW"]),
        ),
    )
    runtime = Boxlite.default()
    box = await runtime.create(options)
    try:
        execution = await box.exec("sh", ["-c", "grep -E '^(CapBnd|Seccomp):' /proc/self/status; ulimit -n"])
        out = []
        async for line in execution.stdout():
            out.append(line if isinstance(line, str) else line.decode())
        await execution.wait()
        print("".join(out).strip())
        for _ in range(200):
            info = await box.info()
            if info.health_status.state.is_healthy():
                break
            await asyncio.sleep(0.1)
        print("health", info.health_status.state, info.health_status.failures)
        m = await box.metrics()  # BoxLite 0.10's fields
        print("stages", m.stage_filesystem_setup_ms >= 0, m.stage_guest_rootfs_ms >= 0, m.stage_image_prepare_ms >= 0,
              m.network_tcp_errors)
    finally:
        await box.stop()  # auto_remove (the default) removes it


asyncio.run(main())
'''


def test_program(tmp_path):
    need_image("alpine:latest")
    prog = tmp_path / "advanced_options.py"
    prog.write_text(PROGRAM)
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    want = (0xa80425fb & ~(1 << 27) | 1 << 12) & ~(1 << 13)  # docker's without MKNOD, + NET_ADMIN, - NET_RAW
    assert f"CapBnd:\t{want:016x}" in lines, p.stdout
    assert "Seccomp:\t2" in lines, p.stdout  # maximum keeps the filter
    assert "333" in lines, p.stdout
    assert "health healthy 0" in lines, p.stdout
    assert "stages True True True 0" in lines, p.stdout  # network_tcp_errors: no connection failed
