#!/bin/bash
# make test-rest-sdk: the Python and Node SimpleBox and CodeBox suites against
# a REST runtime. Starts `build/boxlite serve` on loopback over a home of its
# own with both test images loaded, makes a key, exports BOXLITE_REST_URL and
# BOXLITE_API_KEY (the suites' runtime is then Boxlite.rest(from_env()), see
# bindings/python/tests/conftest.py and bindings/node/test/helpers.js), runs
# them, then removes the server's boxes and stops it. Tests that are local by
# nature (loading a tar image, host volumes, template VMs) are marked so in
# the suites and reported as skipped with their reason.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bx="$repo/build/boxlite"
home=$(mktemp -d /tmp/boxlite-rest-sdk.XXXXXX)
keys="$home/serve/keys"
log="$home/serve.log"
pid=""

cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then
    if [ -n "${BOXLITE_REST_URL:-}" ]; then
      timeout 300 python3 - <<'PY' || rc=1
import json, os, urllib.request
url, key = os.environ["BOXLITE_REST_URL"], os.environ["BOXLITE_API_KEY"]
def call(method, path):
    req = urllib.request.Request(url + path, method=method, headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()
boxes = json.loads(call("GET", "/v1/boxes?pageSize=1000"))["boxes"]
for b in boxes:
    call("DELETE", f"/v1/boxes/{b['box_id']}?force=true")
print(f"removed the server's {len(boxes)} boxes")
PY
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$home"
  exit $rc
}
trap cleanup EXIT

export BOXLITE_HOME="$home"
timeout 600 "$bx" image load "$BOXLITE_TEST_IMAGE" >/dev/null
timeout 600 "$bx" image load "$BOXLITE_TEST_PYTHON_IMAGE" >/dev/null
key=$(timeout 60 "$bx" serve key create --keys "$keys" --name sdk-tests)
"$bx" serve --listen 127.0.0.1:0 --keys "$keys" 2>"$log" &
pid=$!
url=""
for _ in $(seq 600); do
  url=$(grep -o 'listening on https\?://[0-9.:]*' "$log" | head -1 | cut -d' ' -f3 || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "boxlite serve did not listen within a minute"; cat "$log"; exit 1; }
export BOXLITE_REST_URL="$url" BOXLITE_API_KEY="$key"
echo "boxlite serve at $url (home $home)"

# The suites' own homes stay unused: every box is the server's.
(cd "$repo/bindings/python/tests" && env -u BOXLITE_ASSETS timeout 2400 python3 -m pytest -q -rs test_alpine.py test_codebox.py test_run_code.py)
(cd "$repo/bindings/node" && BOXLITE_ASSETS= timeout 2400 node --test --test-concurrency=1 test/simplebox.test.js test/codebox.test.js test/run_code.test.js)
