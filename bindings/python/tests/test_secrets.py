"""Secrets (boxlite.Secret): the object's shape as BoxLite 0.10's, bad specs
refused before anything boots, and one python:slim box whose secret reaches
an HTTPS server on the host's loopback (its certificate from a test CA the
host trusts through SSL_CERT_FILE) while the box sees only the placeholder.

The box runs in a child Python: the shim reads the host's trust store from
the environment the library was loaded with (Go copies it at load), so
SSL_CERT_FILE has to be set before then, as a user sets it before starting
a program."""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading

import pytest

import boxlite
from conftest import need_image

ALIAS = "host.boxlite.internal"
VALUE = "sk-real-" + os.urandom(12).hex()


def test_secret_shape():
    s = boxlite.Secret(name="openai", value=VALUE, hosts=["api.openai.com"])
    assert s.placeholder is None and s.get_placeholder() == "<BOXLITE_SECRET:openai>"
    # BoxLite's repr, the value redacted.
    assert repr(s) == 'Secret(name="openai", hosts=["api.openai.com"], placeholder="<BOXLITE_SECRET:openai>", value=[REDACTED])'
    assert VALUE not in str(s) and s.value == VALUE
    s.hosts = ["*.openai.com"]  # mutable, as BoxLite's
    assert s.hosts == ["*.openai.com"]
    assert boxlite.Secret("a", "v", ["h"], "PH-12345").get_placeholder() == "PH-12345"
    assert boxlite.Secret(name="a", value="v").hosts == []


@pytest.mark.parametrize("secrets, msg", [
    ([boxlite.Secret(name="a", value="v")], "hosts"),
    ([boxlite.Secret(name="a", value="", hosts=["h"])], "value"),
    ([boxlite.Secret(name="a", value="x\ny", hosts=["h"])], "line break"),
    ([{"name": "a", "value": "v", "hosts": ["h"], "bogus": 1}], "bogus"),
    ("not a list", "list"),
])
@pytest.mark.local_only("boxlite serve refuses secrets (not served yet)")
def test_bad_secrets_are_refused(run, secrets, msg):
    with pytest.raises((boxlite.InvalidArgumentError, TypeError)) as e:
        run(boxlite.SimpleBox(image="alpine:latest", secrets=secrets).__aenter__())
    assert msg in str(e.value)


def _pki(tmp) -> tuple:
    """A test CA and a server certificate from it for ALIAS, with openssl."""
    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True, timeout=60)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-subj", "/CN=boxlite test CA", "-keyout", "ca.key", "-out", "ca.pem",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={ALIAS}",
         "-keyout", "srv.key", "-out", "srv.csr")
    (tmp / "ext").write_text(f"subjectAltName=DNS:{ALIAS}\nextendedKeyUsage=serverAuth\n")
    ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
         "-extfile", "ext", "-out", "srv.pem")
    return tmp / "ca.pem", tmp / "srv.pem", tmp / "srv.key"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """An HTTPS server (the listed host) and a plain HTTP one on 127.0.0.1;
    each request's Authorization header and body go to `got`."""
    ca, cert, key = _pki(tmp_path_factory.mktemp("pki"))
    got = []

    class Record(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(min(int(self.headers.get("Content-Length", 0)), 1 << 20)).decode()
            got.append(f"{self.headers.get('Authorization')}|{body}")
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"served")

        def log_message(self, *a):
            pass

    tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    for s in (tls, plain):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield ca, tls.server_address[1], plain.server_address[1], got
    for s in (tls, plain):
        s.shutdown()
        s.server_close()


# The child: a box with the secret; prints what the box saw, as JSON.
CHILD = r"""
import asyncio, json, os, sys
import boxlite
tls_port, plain_port = int(sys.argv[1]), int(sys.argv[2])
FETCH = '''
import os, sys, urllib.request
ph = os.environ["BOXLITE_SECRET_API"]
req = urllib.request.Request(sys.argv[1], data=("key=" + ph).encode(), headers={"Authorization": "Bearer " + ph})
print(urllib.request.urlopen(req, timeout=60).read().decode())
'''
async def main():
    sec = boxlite.Secret(name="api", value=os.environ.pop("SECRET_VALUE"), hosts=[f"host.boxlite.internal:{tls_port}"])
    out = {"placeholder": sec.get_placeholder()}
    async with boxlite.SimpleBox(image="python:slim", memory_mib=512, secrets=[sec]) as box:
        out["env"] = (await box.exec("sh", "-c", "echo $BOXLITE_SECRET_API")).stdout.strip()
        info = box.info()
        out["info"] = [[s.name, s.hosts, s.placeholder] for s in info.secrets]
        out["info_raw"] = json.dumps(info.raw)
        for key, url in (("listed", f"https://host.boxlite.internal:{tls_port}/v1"),
                         ("unlisted", f"http://host.boxlite.internal:{plain_port}/")):
            r = await box.exec("python3", "-c", FETCH, url, timeout=120)
            out[key] = [r.exit_code, r.stdout.strip(), r.stderr[-2000:]]
    print("RESULT " + json.dumps(out))
asyncio.run(main())
"""


@pytest.mark.local_only("the box's shim reads SSL_CERT_FILE from the environment of this host's process")
def test_secret_reaches_the_listed_host_only(servers):
    need_image("python:slim")
    ca, tls_port, plain_port, got = servers
    env = dict(os.environ, SSL_CERT_FILE=str(ca), SECRET_VALUE=VALUE)
    p = subprocess.run([sys.executable, "-c", CHILD, str(tls_port), str(plain_port)], env=env,
                       capture_output=True, text=True, timeout=600)
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stdout + p.stderr
    out = json.loads(line[0][len("RESULT "):])
    ph = out["placeholder"]
    assert out["env"] == ph  # the box's environment has the placeholder
    assert out["info"] == [["api", [f"{ALIAS}:{tls_port}"], ph]]
    assert VALUE not in out["info_raw"]
    assert out["listed"][:2] == [0, "served"], out["listed"]
    assert out["unlisted"][:2] == [0, "served"], out["unlisted"]
    # The listed host got the value in the header and the body; the
    # unlisted one the placeholder.
    assert got == [f"Bearer {VALUE}|key={VALUE}", f"Bearer {ph}|key={ph}"]
