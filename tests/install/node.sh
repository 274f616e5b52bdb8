#!/bin/sh
# tests/install/node.sh: the npm package installed as users install it (make test-install-node).
#   - the tarball carries native/ (library, shim, network stack, virtiofsd, guest, prebuilt addon);
#   - dist/'s tarball served as an npm registry on loopback (tests/install/index.py): the
#     README's install snippet run as it is (`npm install boxlite-go`, then the alias
#     `npm install @boxlite-ai/boxlite@npm:boxlite-go`), npm pointed at it by npm_config_registry,
#     in a fresh project; the install uses the prebuilt addon, compiles nothing;
#   - the README's ESM, CodeBox and CommonJS examples, under both names, outside the checkout
#     and without BOXLITE_ASSETS or BOXLITE_BUILD_DIR;
#   - where the prebuilt addon cannot be used and there is no compiler, the install script
#     fails naming gcc.
# Needs: BOXLITE_DIST (dist/), PYTHON_IMAGE and ALPINE_IMAGE (test images).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
: "${BOXLITE_DIST:?}" "${PYTHON_IMAGE:?}" "${ALPINE_IMAGE:?}"
tgz=$(one "$BOXLITE_DIST"/boxlite-go-*.tgz)
tmp=$(mktemp -d /tmp/boxlite-install-node.XXXXXX)
cleanup() { stop_index; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
unset BOXLITE_ASSETS BOXLITE_BUILD_DIR BOXLITE_LIB || true
export BOXLITE_HOME=$tmp/home npm_config_cache=$tmp/npm-cache npm_config_audit=false npm_config_fund=false \
  npm_config_update_notifier=false

step "the tarball's native parts"
tar tzf "$tgz" >"$tmp/list"
for f in libboxlite.so boxlite-shim boxlite-net virtiofsd boxlite.node PREBUILT guest/vmlinuz guest/initramfs.cpio include/boxlite.h; do
  grep -qx "package/native/$f" "$tmp/list" || die "$(basename "$tgz") lacks native/$f"
done
echo "ok: $(grep -c '^package/native/' "$tmp/list") files in native/, $(du -h "$tgz" | cut -f1)"

start_index "$tmp/index" "$tgz"
export npm_config_registry=$INDEX/npm/

step "the README's npm install snippet, from the loopback registry (node $(node --version), npm $(npm --version))"
proj=$tmp/proj
mkdir -p "$proj"
echo '{ "name": "app", "private": true, "type": "module" }' >"$proj/package.json"
snippet "$repo/README.md" npm-install >"$proj/install.sh"
t0=$(date +%s)
# CC names no compiler: an install that tried to compile would fail.
(cd "$proj" && CC=no-such-cc npm_config_foreground_scripts=true sh -eux install.sh) >"$proj/install.log" 2>&1 || { cat "$proj/install.log"; die "npm install failed"; }
echo "ok: installed both names in $(($(date +%s) - t0)) s"
# npm 11 runs a dependency's install script only once approved (the package works without it);
# earlier npms run it: either way, what it does here is to use the prebuilt addon.
for d in boxlite-go @boxlite-ai/boxlite; do
  (cd "$proj/node_modules/$d" && CC=no-such-cc node scripts/install.js) | grep "using the prebuilt addon" ||
    die "$d: the install script did not take the prebuilt addon"
done
node -e "const p = require('$proj/package.json'); console.log(JSON.stringify(p.dependencies))"
[ -f "$proj/node_modules/@boxlite-ai/boxlite/native/boxlite.node" ] || die "the alias has no addon"

(cd "$proj" && node -e "const b = require('@boxlite-ai/boxlite'); const r = require('boxlite-go/raw'); console.log(typeof b.CodeBox, r.statusName(r.ERR_CLOSED))")
(cd "$proj" && node --input-type=module -e "
import { JsBoxlite } from 'boxlite-go';
const rt = new JsBoxlite({});
for (const p of process.argv.slice(1)) await rt.images.load(p);
await rt.close();" "$ALPINE_IMAGE" "$PYTHON_IMAGE")

for name in boxlite-go @boxlite-ai/boxlite; do
  step "the README's ESM example, importing $name"
  snippet "$repo/bindings/node/README.md" node-esm | sed "s#from 'boxlite-go'#from '$name'#" >"$proj/esm.mjs"
  grep -q "from '$name'" "$proj/esm.mjs" || die "the snippet does not import boxlite-go"
  expect "$proj" "$proj/esm.out" '^3 hello' timeout 600 node esm.mjs
done

step "the README's CodeBox example"
snippet "$repo/bindings/node/README.md" node-codebox >"$proj/codebox.mjs"
expect "$proj" "$proj/codebox.out" '^4950$' timeout 600 node codebox.mjs
grep -q "ZeroDivisionError" "$proj/codebox.out" || die "the CodeBox example's error has no traceback"

step "the README's CommonJS example"
snippet "$repo/README.md" node-cjs >"$proj/cjs.cjs"
expect "$proj" "$proj/cjs.out" '^0 Linux' timeout 600 node cjs.cjs

step "no prebuilt addon that fits and no compiler: the install script says gcc"
mkdir -p "$tmp/unpacked" && tar xzf "$tgz" -C "$tmp/unpacked"
rm "$tmp/unpacked/package/native/PREBUILT"
if (cd "$tmp/unpacked/package" && CC=no-such-cc node scripts/install.js) >"$tmp/nocc.log" 2>&1; then
  die "the install script succeeded without a prebuilt addon or a compiler"
fi
cat "$tmp/nocc.log"
grep -q "Install gcc" "$tmp/nocc.log" || die "the install script's error does not name gcc"
step "node: all passed"
