#!/bin/sh
# packaging/node-dist.sh NATIVE STAGE OUTDIR: the npm package boxlite-go, as `npm pack` makes it,
# into OUTDIR. It carries native/ from NATIVE (packaging/native.sh): the library, shim, network
# stack, virtiofsd, guest and a prebuilt addon for linux-x64 glibc (native/PREBUILT says so), so
# `npm install` needs no compiler and no boxlite build (scripts/install.js uses the prebuilt
# addon when it loads, else compiles one with gcc). No dependencies: nothing else is fetched.
set -eu
nat=$1 stage=$2 out=$3
rm -rf "$stage" && mkdir -p "$stage/native/guest" "$stage/native/include" "$out"
cp -r bindings/node/package.json bindings/node/README.md bindings/node/lib bindings/node/src bindings/node/scripts "$stage/"
for f in libboxlite.so boxlite-shim boxlite-net virtiofsd boxlite.node guest/vmlinuz guest/initramfs.cpio; do
  [ -f "$nat/$f" ] || { echo "node-dist: $nat/$f missing (packaging/native.sh)" >&2; exit 1; }
  cp -p "$nat/$f" "$stage/native/$f"
done
cp include/boxlite.h "$stage/native/include/"
echo "linux-x64-glibc" >"$stage/native/PREBUILT"
# The released package runs its native parts only on x64: npm says so (EBADPLATFORM) on others.
node -e '
const fs = require("fs"); const p = process.argv[1]; const j = JSON.parse(fs.readFileSync(p));
j.cpu = ["x64"]; delete j.devDependencies;
fs.writeFileSync(p, JSON.stringify(j, null, 2) + "\n");' "$stage/package.json"
(cd "$stage" && npm pack --silent --pack-destination "$(realpath "$out")") >/dev/null
