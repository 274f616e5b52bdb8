"""Drives `boxlite serve`'s secrets with BoxLite's own Python package
(0.10.8). A box made with BoxOptions(secrets=[Secret(...)])
sends its placeholder to the listed HTTPS host, which receives the value
(the Go test checks what each server got); an unlisted plain-HTTP server
gets the placeholder. The value is in no answer of the API and nowhere in
the box. Environment: BOXLITE_REST_URL, BOXLITE_API_KEY, LISTED_URL,
PLAIN_URL, VALUE, HOSTS."""
import os
import sys

import boxlite
from restcheck import check, run

VALUE = os.environ["VALUE"]
REQUEST = r"""
import os, sys, urllib.request
ph = os.environ["BOXLITE_SECRET_API"]
req = urllib.request.Request(sys.argv[1], data=("key=" + ph).encode(), headers={"Authorization": "Bearer " + ph})
print(urllib.request.urlopen(req, timeout=60).read().decode())
"""

# Node's http2 client (the image's nodejs): ALPN h2 only, the box's CA
# from NODE_EXTRA_CA_CERTS as the box sets it.
NODE_H2 = r"""
const http2 = require('http2');
const ph = process.env.BOXLITE_SECRET_API;
const c = http2.connect(process.argv[1], {ALPNProtocols: ['h2']});
c.on('error', e => { console.error('h2:', e.message); process.exit(2); });
const req = c.request({':method': 'POST', ':path': '/h2', 'authorization': 'Bearer ' + ph, 'content-type': 'text/plain'});
let out = '';
req.setEncoding('utf8');
req.on('data', d => out += d);
req.on('end', () => { console.log(out); c.close(); });
req.end('key=' + ph);
"""



async def main():
    rt = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions.from_env())
    secret = boxlite.Secret(name="api", value=VALUE, hosts=os.environ["HOSTS"].split(","))
    ph = secret.get_placeholder()
    box = await rt.create(boxlite.BoxOptions(image="python:slim", memory_mib=512, secrets=[secret]), name="rest-secrets")
    try:
        r = await box.exec("sh", ["-c", 'printf %s "$BOXLITE_SECRET_API"'])
        out = [line async for line in r.stdout()]
        await r.wait()
        check("".join(out) == ph, f"the box sees the placeholder (got {out})")
        for url in (os.environ["LISTED_URL"], os.environ["PLAIN_URL"]):
            ex = await box.exec("python3", ["-c", REQUEST, url])
            out = [line async for line in ex.stdout()]
            err = [line async for line in ex.stderr()]
            res = await ex.wait()
            check(res.exit_code == 0 and "served" in "".join(out), f"request to {url} (exit {res.exit_code}: {''.join(err)[-400:]})")
        ex = await box.exec("node", ["-e", NODE_H2, os.environ["LISTED_URL"]])
        out = [line async for line in ex.stdout()]
        err = [line async for line in ex.stderr()]
        res = await ex.wait()
        check(res.exit_code == 0 and "served" in "".join(out), f"an HTTP/2 request to the listed host (exit {res.exit_code}: {''.join(err)[-400:]})")
        info = await rt.get_info("rest-secrets")
        listed = await rt.list_info()
        check(VALUE not in repr(info) and VALUE not in repr(listed), "info and list hold no value")
        script = f"""
for f in /proc/[0-9]*/environ; do grep -qaF '{VALUE}' "$f" 2>/dev/null && {{ echo "in $f"; exit 4; }}; done
grep -rlaF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev '{VALUE}' / 2>/dev/null && exit 5
echo clean"""
        ex = await box.exec("sh", ["-c", script])
        out = [line async for line in ex.stdout()]
        res = await ex.wait()
        # (exit 0 only when clean; the output of this long silent scan can be
        # lost by BoxLite's client, which then takes the exit from a status probe)
        check(res.exit_code == 0, f"the value is nowhere in the box (exit {res.exit_code}, {out})")
    finally:
        await rt.remove("rest-secrets", force=True)
    print("ALL OK", flush=True)


run(main)
