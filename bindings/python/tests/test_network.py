"""Networking: one python:slim CodeBox for the enabled network (a host server
through host.boxlite.internal, a published port, install_package from a
package index the test serves on the host's loopback), one alpine box with
the network disabled, and bad specs that fail before anything boots."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.server
import io
import os
import socket
import threading
import time
import urllib.request
import zipfile

import pytest

import boxlite
from conftest import need_image, shim_children

ALIAS = "host.boxlite.internal"
PKG, PKG_VERSION, PKG_VALUE = "netbpkg", "1.0", "hello-from-netbpkg"


def _wheel() -> tuple:
    """A minimal pure-Python wheel, written by hand: (file name, bytes)."""
    dist = f"{PKG}-{PKG_VERSION}"
    files = {
        f"{PKG}/__init__.py": f"X = {PKG_VALUE!r}\n".encode(),
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PKG}\nVersion: {PKG_VERSION}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test_network\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    record += f"{dist}.dist-info/RECORD,,\n"
    files[f"{dist}.dist-info/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return f"{dist}-py3-none-any.whl", buf.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """An HTTP server on the host's 127.0.0.1 (a free port): /token.txt and a
    PEP 503 index at /simple/ with the wheel."""
    root = tmp_path_factory.mktemp("www")
    token = os.urandom(8).hex()
    (root / "token.txt").write_text(token)
    whl, data = _wheel()
    (root / "files").mkdir()
    (root / "files" / whl).write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    (root / "simple" / PKG).mkdir(parents=True)
    (root / "simple" / "index.html").write_text(f'<html><body><a href="{PKG}/">{PKG}</a></body></html>\n')
    (root / "simple" / PKG / "index.html").write_text(
        f'<html><body><a href="/files/{whl}#sha256={sha}">{whl}</a></body></html>\n')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], token
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def cb(run, server):
    need_image("python:slim")
    port, _ = server
    b = boxlite.CodeBox(
        image="python:slim", memory_mib=512,
        env=[("PIP_INDEX_URL", f"http://{ALIAS}:{port}/simple"), ("PIP_TRUSTED_HOST", ALIAS),
             ("PIP_DISABLE_PIP_VERSION_CHECK", "1")],
        ports=[(0, 8000)],  # a free host port reaching the box's 8000
    )
    run(b.__aenter__())
    yield b
    run(b.__aexit__(None, None, None))


def test_info_shows_the_network(cb):
    info = cb.info()
    assert info.network_mode == "enabled"
    net = info.network
    assert isinstance(net, boxlite.NetworkInfo) and net.guest_ip and net.gateway_ip, info.raw
    assert len(info.ports) == 1, info.raw
    p = info.ports[0]
    assert isinstance(p, boxlite.PortMapping)
    assert (p.guest_port, p.protocol, p.host_ip) == (8000, "tcp", "127.0.0.1")
    assert 0 < p.host_port < 65536  # the port picked for host_port 0


def test_box_reaches_the_host_alias(cb, run, server):
    port, token = server
    r = run(cb.exec("python3", "-c",
                    f"import urllib.request; print(urllib.request.urlopen('http://{ALIAS}:{port}/token.txt', timeout=30).read().decode())",
                    timeout=120))
    assert r.exit_code == 0, r
    assert r.stdout.strip() == token


def test_published_port(cb, run):
    host_port = cb.info().ports[0].host_port

    async def serve_and_fetch():
        # A server in the box, alive while we fetch from the host.
        ex = await cb.box.exec("python3", "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", "/etc",
                               stdin=False, timeout=300)
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    body = await asyncio.to_thread(
                        lambda: urllib.request.urlopen(f"http://127.0.0.1:{host_port}/hostname", timeout=10).read())
                    return body
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
        finally:
            await ex.kill()
            ex.close()

    body = run(serve_and_fetch())
    assert body.strip() == run(cb.exec("cat", "/etc/hostname")).stdout.strip().encode()


def test_install_package_from_the_hosts_index(cb, run):
    out = run(asyncio.wait_for(cb.install_package(PKG), 300))
    assert f"Successfully installed {PKG}-{PKG_VERSION}" in out, out
    # The same session that run() uses imports it at once.
    assert run(cb.run(f"import {PKG}; print({PKG}.X)", timeout=120)).strip() == PKG_VALUE


def test_disabled_network_has_only_lo(run):
    need_image("alpine:latest")

    async def go():
        async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256,
                                     network=boxlite.NetworkSpec(mode="disabled")) as box:
            info = box.info()
            r = await box.exec("cat", "/proc/net/dev", timeout=60)
            return info, r

    info, r = run(go())
    assert r.exit_code == 0, r
    ifaces = [line.split(":")[0].strip() for line in r.stdout.splitlines()[2:]]
    assert ifaces == ["lo"], r.stdout
    assert info.ports == [] and info.network_mode == "disabled" and not info.network.guest_ip
    assert info.network.outbound.mode == "disabled" and info.network.published_ports == ()


def test_host_port_in_use_is_already_exists(run):
    need_image("alpine:latest")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(boxlite.AlreadyExistsError, match=str(busy)):
            run(asyncio.wait_for(boxlite.SimpleBox(image="alpine:latest", memory_mib=256,
                                                   ports=[(busy, 80)]).__aenter__(), 120))


@pytest.mark.parametrize("kwargs, match", [
    ({"network": "bridged"}, "mode"),
    ({"network": boxlite.NetworkSpec(mode="disabled", allow_net=["pypi.org"])}, "disabled"),
    ({"network": "disabled", "ports": [(0, 80)]}, "disabled"),
    ({"network": boxlite.NetworkSpec(allow_net=["bad host!"])}, "bad host"),
    ({"ports": [(0, 70000)]}, "70000"),
    ({"ports": [(8080, 80, "sctp")]}, "sctp"),
    ({"ports": [(8080, 80), (8080, 81)]}, "twice"),
])
def test_bad_specs_fail_before_boot(run, kwargs, match):
    before = shim_children()
    with pytest.raises(boxlite.InvalidArgumentError, match=match):
        run(asyncio.wait_for(boxlite.SimpleBox(image="alpine:latest", **kwargs).__aenter__(), 60))
    assert shim_children() <= before  # nothing booted


def test_bad_shapes_raise_type_error():
    with pytest.raises(TypeError, match="ports"):
        boxlite.SimpleBox(image="alpine:latest", ports=[80])
    with pytest.raises(TypeError, match="ports"):
        boxlite.SimpleBox(image="alpine:latest", ports=[("80", 80)])
    with pytest.raises(TypeError, match="network"):
        boxlite.SimpleBox(image="alpine:latest", network=True)
    with pytest.raises(TypeError, match="allow_net"):
        boxlite.SimpleBox(image="alpine:latest", network=boxlite.NetworkSpec(allow_net="pypi.org"))
    # The JSON the library gets: tuples and dicts alike.
    o = boxlite.BoxOptions(image="a", network={"mode": "enabled", "allow_net": [ALIAS]},
                           ports=[(None, 80), (5353, 53, "udp"), {"guest_port": 22, "host_ip": "0.0.0.0"}])
    import json
    d = json.loads(o.to_json())
    assert d["network"] == {"mode": "enabled", "allow_net": [ALIAS]}
    assert d["ports"] == [{"guest_port": 80, "host_port": 0}, {"guest_port": 53, "host_port": 5353, "protocol": "udp"},
                          {"guest_port": 22, "host_port": 0, "host_ip": "0.0.0.0"}]
