"""Tunnels: a box with its network disabled serves HTTP on its loopback;
forward() makes it a host address (TCP and Unix) that urllib reaches,
connect() carries a request with a half-close and reads the answer to EOF;
the sync API the same; update_outbound on a running box."""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
import tempfile
import urllib.request

import pytest

import boxlite
from conftest import need_image

SERVE = "mkdir -p /srv && echo tunnel-page > /srv/index.html && exec httpd -f -p 127.0.0.1:8000 -h /srv"


def test_tunnel_forward_and_connect(run):
    need_image("alpine:latest")

    async def go():
        async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256, network="disabled") as box:
            server = await box.box.exec("sh", "-c", SERVE)  # runs as long as this execution
            try:
                for _ in range(150):
                    try:
                        c = await (await box.tunnel(8000)).connect()
                        await c.close()
                        break
                    except boxlite.UnreachableError:
                        await asyncio.sleep(0.2)
                # connect(): a request, the half-close, the answer to EOF.
                tunnel = await box.network.tunnel(8000)
                assert tunnel.uri() is None
                conn = await tunnel.connect()
                with pytest.raises(boxlite.InvalidStateError, match="one-shot"):
                    await tunnel.connect()
                await conn.write(b"GET /index.html HTTP/1.0\r\nHost: box\r\n\r\n")
                await conn.shutdown_write()
                answer = b""
                while True:
                    b = await conn.read(7)
                    if not b:
                        break
                    answer += b
                await conn.close()
                with pytest.raises(boxlite.ClosedError, match="connection is closed"):
                    await conn.read(10)
                with pytest.raises(ValueError, match="non-zero"):
                    await (await (await box.tunnel(8000)).connect()).read(0)
                # forward(): TCP, then a Unix socket.
                fw = await (await box.network.tunnel(8000)).forward(boxlite.SocketAddress.tcp("127.0.0.1", 0))
                addr = fw.local_addr()
                loop = asyncio.get_running_loop()
                url = f"http://{addr.host}:{addr.port}/index.html"
                bodies = [await loop.run_in_executor(None, lambda: urllib.request.urlopen(url, timeout=60).read())
                          for _ in range(3)]
                await fw.close()
                await asyncio.wait_for(fw.wait(), 30)
                sock = os.path.join(tempfile.mkdtemp(), "box.sock")
                ufw = await (await box.network.tunnel(8000)).forward(boxlite.SocketAddress.unix(sock))

                def over_unix():
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(sock)
                    c = http.client.HTTPConnection("box")
                    c.sock = s
                    c.request("GET", "/index.html")
                    return c.getresponse().read()

                ubody = await loop.run_in_executor(None, over_unix)
                await ufw.close()
                gone = not os.path.exists(sock)
                # Nothing listens on 8001: that tunnel fails, the box goes on.
                with pytest.raises(boxlite.UnreachableError):
                    await (await box.tunnel(8001)).connect()
                r = await box.exec("echo", "alive")
                return answer, bodies, ubody, gone, r.stdout, (await box.box.info()).network
            finally:
                await server.kill()

    answer, bodies, ubody, gone, alive, net = run(go())
    assert answer.startswith(b"HTTP/1.") and answer.endswith(b"tunnel-page\n"), answer
    assert bodies == [b"tunnel-page\n"] * 3 and ubody == b"tunnel-page\n" and gone
    assert alive == "alive\n"
    assert net.outbound.mode == "disabled" and not net.guest_ip


def test_bad_tunnel_arguments():
    with pytest.raises(ValueError, match="numeric IP"):
        boxlite.SocketAddress.tcp("localhost", 0)
    with pytest.raises(ValueError, match="absolute"):
        boxlite.SocketAddress.unix("rel.sock")
    with pytest.raises(ValueError, match="65535"):
        boxlite.SocketAddress.tcp("127.0.0.1", 70000)


def test_sync_tunnel():
    need_image("alpine:latest")
    with boxlite.SyncSimpleBox(image="alpine:latest", memory_mib=256, network="disabled") as box:
        server = box.box.exec("sh", "-c", SERVE)
        try:
            for _ in range(150):
                try:
                    box.tunnel(8000).connect().close()
                    break
                except boxlite.UnreachableError:
                    import time
                    time.sleep(0.2)
            fw = box.network.tunnel(8000).forward(boxlite.SocketAddress.tcp())
            a = fw.local_addr()
            body = urllib.request.urlopen(f"http://{a.host}:{a.port}/index.html", timeout=60).read()
            fw.close()
            assert body == b"tunnel-page\n"
            c = box.network.tunnel(8000).connect()
            c.write(b"GET / HTTP/1.0\r\n\r\n")
            c.shutdown_write()
            got = b""
            while True:
                b = c.read(65536)
                if not b:
                    break
                got += b
            c.close()
            assert got.endswith(b"tunnel-page\n"), got
        finally:
            server.kill()


def test_update_outbound_on_a_running_box(run):
    """A host server the box reaches, then not (update_outbound to an
    allow-list without it), then again (enabled, no list)."""
    need_image("python:slim")
    import http.server
    import threading

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("H", (http.server.BaseHTTPRequestHandler,), {
        "do_GET": lambda self: (self.send_response(200), self.end_headers(), self.wfile.write(b"ok")),
        "log_message": lambda *a: None}))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    fetch = ("import urllib.request,sys\ntry:\n print(urllib.request.urlopen("
             f"'http://host.boxlite.internal:{port}/', timeout=10).read().decode())\n"
             "except Exception as e:\n print('blocked', type(e).__name__)")

    async def go():
        spec = boxlite.NetworkSpec(outbound=boxlite.OutboundNetworkSpec(mode="enabled", allow_net=["host.boxlite.internal"]))
        async with boxlite.SimpleBox(image="python:slim", memory_mib=512, network=spec) as box:
            out = [(await box.exec("python3", "-c", fetch, timeout=120)).stdout.strip()]
            await box.network.update_outbound(boxlite.OutboundNetworkSpec(mode="enabled", allow_net=["example.com"]))
            out.append((await box.exec("python3", "-c", fetch, timeout=120)).stdout.strip())
            info1 = box.info().network
            await box.network.update_outbound(boxlite.OutboundNetworkSpec(mode="enabled", allow_net=["host.boxlite.internal"]))
            out.append((await box.exec("python3", "-c", fetch, timeout=120)).stdout.strip())
            with pytest.raises(boxlite.UnsupportedError):
                await box.network.update_inbound(boxlite.InboundNetworkSpec(mode="enabled", allow_net=["1.2.3.4"]))
            await box.network.update_inbound(boxlite.InboundNetworkSpec(mode="disabled"))
            return out, info1, box.info().network

    try:
        out, info1, info2 = run(go())
    finally:
        srv.shutdown()
    assert out[0] == "ok" and out[1].startswith("blocked") and out[2] == "ok", out
    assert info1.outbound.allow_net == ("example.com",) and info1.mode == "enabled"
    assert info2.inbound.mode == "disabled"
