"""Drives `boxlite serve`'s tunnels with BoxLite's own Python package
(0.10.8): box.network.tunnel(port) reaches the server's descriptor route,
then connect() (a request, the half-close, the answer to EOF) and
forward() (a host address urllib reaches) go through the server's CONNECT
listener to httpd in a box without a network. revoke_tunnel refuses the
next CONNECT of a descriptor; a forged token is refused.
Environment: BOXLITE_REST_URL, BOXLITE_API_KEY."""
import asyncio
import socket
import urllib.parse
import urllib.request

import boxlite
from restcheck import check, run

SERVE = "mkdir -p /srv && echo tunnel-page > /srv/index.html && (httpd -f -p 127.0.0.1:8000 -h /srv </dev/null >/dev/null 2>&1 &)"



async def read_all(conn):
    out = b""
    while True:
        b = await conn.read(4096)
        if not b:
            return out
        out += b


async def main():
    rt = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions.from_env())
    async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256, runtime=rt, name="rest-tunnel") as box:
        r = await box.exec("sh", "-c", SERVE)
        check(r.exit_code == 0, f"httpd started in the box (exit {r.exit_code}, {r.stderr!r})")
        for _ in range(100):
            r = await box.exec("sh", "-c", "nc -z 127.0.0.1 8000 || netstat -ltn | grep -q ':8000 '")
            if r.exit_code == 0:
                break
            await asyncio.sleep(0.2)

        tunnel = await box.network.tunnel(8000)
        uri = tunnel.uri()
        print("descriptor uri:", uri.split("@")[-1], flush=True)
        check(uri is not None and "@" in uri, "a REST tunnel has a uri (its token in the userinfo)")
        conn = await tunnel.connect()
        await conn.write(b"GET /index.html HTTP/1.0\r\nHost: box\r\n\r\n")
        await conn.shutdown_write()
        answer = await read_all(conn)
        await conn.close()
        check(answer.startswith(b"HTTP/1.") and answer.endswith(b"tunnel-page\n"), f"connect(): the box's answer to EOF (got {answer[:80]!r})")

        fw = await (await box.network.tunnel(8000)).forward(boxlite.SocketAddress.tcp("127.0.0.1", 0))
        addr = fw.local_addr()
        loop = asyncio.get_running_loop()
        url = f"http://{addr.host}:{addr.port}/index.html"
        bodies = [await loop.run_in_executor(None, lambda: urllib.request.urlopen(url, timeout=60).read()) for _ in range(3)]
        await fw.close()
        check(bodies == [b"tunnel-page\n"] * 3, f"forward(): three requests through one descriptor (got {bodies})")

        # A descriptor revoked: its next CONNECT is refused.
        t2 = await box.network.tunnel(8000)
        await box.network.revoke_tunnel(8000)
        try:
            c = await t2.connect()
            refused = await read_all(c) == b""
        except Exception as e:
            print("revoked:", type(e).__name__, str(e)[:120], flush=True)
            refused = True
        check(refused, "a revoked descriptor carries nothing")

        # A forged token: the listener refuses it before any box is reached.
        u = urllib.parse.urlsplit(uri)
        s = socket.create_connection((u.hostname, u.port), timeout=30)
        s.sendall(f"CONNECT bxt_forged@{u.hostname}:{u.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        line = s.makefile("rb").readline()
        s.close()
        check(line.startswith(b"HTTP/1.1 403"), f"a forged token is refused (got {line!r})")

        # Nothing listens on 8001: the CONNECT fails, the box goes on.
        try:
            c = await (await box.network.tunnel(8001)).connect()
            dead = await read_all(c) == b""
        except Exception as e:
            print("port 8001:", type(e).__name__, str(e)[:160], flush=True)
            dead = True
        check(dead, "a port nothing listens on gives no stream")
        r = await box.exec("echo", "alive")
        check(r.stdout == "alive\n", "the box goes on")
    await rt.remove("rest-tunnel", force=True)
    print("ALL OK", flush=True)


run(main)
