#!/usr/bin/env python3
"""tests/install/index.py ROOT PORTFILE FILE...: serve FILEs as package indexes on loopback.

Binds 127.0.0.1 on a free port, writes the port to PORTFILE, and serves ROOT, which it fills with:
  simple/<name>/index.html   a PEP 503 index of the wheels and sdists among FILE
                             (`pip install --index-url http://127.0.0.1:PORT/simple NAME`)
  npm/<name>                 an npm registry's packument for each npm tarball (*.tgz) among
                             FILE (`npm install --registry http://127.0.0.1:PORT/npm/ NAME`,
                             also `npm install ALIAS@npm:NAME`)
  files/<file>               the files themselves
Standard library only; runs until killed.
"""

import base64
import hashlib
import html
import http.server
import json
import os
import re
import shutil
import socket
import sys
import tarfile
import zipfile


def normalize(name: str) -> str:  # PEP 503
    return re.sub(r"[-_.]+", "-", name).lower()


def python_name(file: str) -> str:
    base = os.path.basename(file)
    if base.endswith(".whl"):
        return normalize(base.split("-")[0])
    return normalize(base[: -len(".tar.gz")].rsplit("-", 1)[0])


def requires_python(whl: str) -> str:
    """A wheel's Requires-Python, for the index's data-requires-python (PEP 503)."""
    if not whl.endswith(".whl"):
        return ""
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode("utf-8", "replace").split("\n"):
            if line.startswith("Requires-Python:"):
                return line.split(":", 1)[1].strip()
    return ""


def npm_manifest(tgz: str) -> dict:
    with tarfile.open(tgz) as t:
        member = t.getmember("package/package.json")
        f = t.extractfile(member)
        assert f is not None
        return json.load(f)


def main() -> None:
    root, portfile, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    base = "http://127.0.0.1:%d" % port

    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "files"))
    os.makedirs(os.path.join(root, "simple"))
    py: dict = {}
    for f in files:
        shutil.copyfile(f, os.path.join(root, "files", os.path.basename(f)))
        data = open(f, "rb").read()
        if f.endswith(".tgz"):
            m = npm_manifest(f)
            ver = dict(m)
            ver["dist"] = {
                "tarball": "%s/files/%s" % (base, os.path.basename(f)),
                "shasum": hashlib.sha1(data).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
            }
            doc = {"name": m["name"], "dist-tags": {"latest": m["version"]}, "versions": {m["version"]: ver}}
            path = os.path.join(root, "npm", m["name"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as out:
                json.dump(doc, out)
        else:
            py.setdefault(python_name(f), []).append((os.path.basename(f), hashlib.sha256(data).hexdigest(), requires_python(f)))
    for name, entries in py.items():
        d = os.path.join(root, "simple", name)
        os.makedirs(d, exist_ok=True)
        links = "".join('<a href="../../files/%s#sha256=%s"%s>%s</a><br>\n' % (
            html.escape(b), h, ' data-requires-python="%s"' % html.escape(rp) if rp else "", html.escape(b))
            for b, h, rp in sorted(entries))
        with open(os.path.join(d, "index.html"), "w") as out:
            out.write("<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % links)
    with open(os.path.join(root, "simple", "index.html"), "w") as out:
        out.write("<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" %
                  "".join('<a href="%s/">%s</a><br>\n' % (n, n) for n in sorted(py)))

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def log_message(self, *a):  # quiet: pip and npm make many requests
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    with open(portfile + ".tmp", "w") as out:
        out.write(str(port))
    os.rename(portfile + ".tmp", portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
