"""Options(image_registries=[ImageRegistry(...)]), BoxLite 0.10's shape: a
pull from a registry on loopback that wants basic auth fails without
credentials (NotFoundError, saying credentials) and works with
them; an unqualified name is found in a search registry; the password is in
no repr and no error. The registry is a small read-only OCI distribution
server in this process serving one synthetic image; no box boots."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import http.server
import io
import json
import tarfile
import threading

import pytest

import boxlite

USER, PASSWORD = "alice", "pa55-" + "x" * 12


def _image():
    """A one-layer linux/amd64 image: {digest: (media type, bytes)} and its manifest."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        data = b"hello from the registry\n"
        ti = tarfile.TarInfo("hello.txt")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    layer_tar = raw.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]}}).encode()
    d = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()  # noqa: E731
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": d(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d(layer), "size": len(layer)}]}).encode()
    return {d(config): config, d(layer): layer}, manifest, d(manifest)


class _Registry(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _serve(blobs, manifest):
    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    seen = {"unauthorized": 0}

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body=b"", ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if code == 200 and self.path.startswith("/v2/") and "/manifests/" in self.path:
                self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest())
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            if self.headers.get("Authorization") != want:
                seen["unauthorized"] += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="boxlite-test"')
                body = b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            p = self.path
            if p == "/v2/":
                return self._send(200, b"{}")
            if p.startswith("/v2/team/app/manifests/"):
                return self._send(200, manifest, "application/vnd.oci.image.manifest.v1+json")
            if p.startswith("/v2/team/app/blobs/"):
                b = blobs.get(p.rsplit("/", 1)[1])
                if b is not None:
                    return self._send(200, b, "application/octet-stream")
            self._send(404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"not here"}]}')

        do_HEAD = do_GET

    srv = _Registry(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def test_registry_shape():
    r = boxlite.ImageRegistry("localhost:5000")
    assert (r.transport, r.skip_verify, r.search, r.username, r.password, r.bearer_token) == ("https", False, False, None, None, None)
    r = boxlite.ImageRegistry(host="h:1", transport="http", username=USER, password=PASSWORD)
    assert PASSWORD not in repr(r) and PASSWORD not in repr(boxlite.Options(image_registries=[r]))
    assert "user alice" in repr(r)
    with pytest.raises(TypeError, match="image_registries"):
        boxlite.Options(image_registries="h:1").to_json()
    with pytest.raises(TypeError, match=r"image_registries\[0\]"):
        boxlite.Options(image_registries=[{"host": "h:1"}]).to_json()
    assert json.loads(boxlite.Options(image_registries=["h:1"]).to_json())["image_registries"] == [{"host": "h:1", "search": True}]


@pytest.mark.local_only("the registry and the store are this process's")
def test_pull_with_credentials(tmp_path):
    blobs, manifest, digest = _image()
    srv, seen = _serve(blobs, manifest)
    host = f"127.0.0.1:{srv.server_address[1]}"

    async def go():
        # Without credentials: refused before any blob, a typed error, nothing stored.
        rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "a"),
                                             image_registries=[boxlite.ImageRegistry(host, transport="http")]))
        try:
            with pytest.raises(boxlite.NotFoundError) as e:
                await rt.images.pull(f"{host}/team/app:1")
            assert "credentials" in str(e.value), e.value
            assert seen["unauthorized"] > 0
            assert await rt.images.list() == []
        finally:
            await rt.shutdown()
        # A wrong password: the same, the password in no message.
        bad = "wrong-" + PASSWORD
        rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "b"), image_registries=[
            boxlite.ImageRegistry(host, transport="http", username=USER, password=bad)]))
        try:
            with pytest.raises(boxlite.NotFoundError) as e:
                await rt.images.pull(f"{host}/team/app:1")
            assert bad not in str(e.value)
        finally:
            await rt.shutdown()
        # With them, and as a search registry for the unqualified name.
        rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "c"), image_registries=[
            boxlite.ImageRegistry(host, transport="http", username=USER, password=PASSWORD, search=True)]))
        try:
            res = await rt.images.pull(f"{host}/team/app:1")
            assert res.reference == f"{host}/team/app:1" and res.layer_count == 1, res
            res = await rt.images.pull("team/app:2")
            assert res.reference == f"{host}/team/app:2", res
            [info] = [i for i in await rt.images.list() if i.reference.endswith(":2")]
            assert info.id == (await rt.images.list())[0].id
        finally:
            await rt.shutdown()
        # Bad registries: refused naming what is wrong.
        for reg, word in [(boxlite.ImageRegistry(host, transport="ftp"), "transport"),
                          (boxlite.ImageRegistry(host, username=USER), "password"),
                          (boxlite.ImageRegistry(host, username=USER, password="p", bearer_token="t"), "bearer")]:
            with pytest.raises(boxlite.InvalidArgumentError, match=word):
                boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "d"), image_registries=[reg]))

    try:
        asyncio.run(go())
    finally:
        srv.shutdown()
