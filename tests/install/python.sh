#!/bin/sh
# tests/install/python.sh: the wheel installed as users install it (make test-install-python).
#   - auditwheel show agrees with the wheel's manylinux tag;
#   - the sdist refuses to build without the native parts, saying why;
#   - dist/ served as a PEP 503 index on loopback (tests/install/index.py, with cffi's wheels);
#     for Debian's /usr/bin/python3 and pyenv's 3.9 and 3.13 (PYTHONS overrides): the
#     README's install snippet (`python3 -m venv .venv ...; pip install boxlite-go`) run as it is,
#     pip pointed at the index by PIP_INDEX_URL, then the README's CodeBox example (prints 42),
#     outside the checkout, with no BOXLITE_ASSETS: the wheel's own assets (a volume too: its
#     virtiofsd);
#   - mypy --strict accepts bindings/python/examples/typed.py against the installed package, and
#     reveals CodeBox / SyncCodeBox for `async with` / `with`.
# Needs: BOXLITE_DIST (dist/), DISTVENV (build/dist/venv: pip, auditwheel, mypy),
# BOXLITE_DISTBUILD (a cache for cffi's wheels), PYTHON_IMAGE and ALPINE_IMAGE (test images).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
: "${BOXLITE_DIST:?}" "${DISTVENV:?}" "${BOXLITE_DISTBUILD:?}" "${PYTHON_IMAGE:?}" "${ALPINE_IMAGE:?}"
# Debian's, the oldest the package claims (3.9) and a newer one (pyenv's).
PYTHONS=${PYTHONS:-/usr/bin/python3 /root/.pyenv/versions/3.9.18/bin/python3 /root/.pyenv/versions/3.13.0/bin/python3}
wheel=$(one "$BOXLITE_DIST"/boxlite_go-*-manylinux_*_x86_64.whl)
sdist=$(one "$BOXLITE_DIST"/boxlite_go-*.tar.gz)
tmp=$(mktemp -d /tmp/boxlite-install-py.XXXXXX)
cleanup() { stop_index; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM

step "auditwheel show $(basename "$wheel")"
plat=$(basename "$wheel" .whl | sed 's/.*-py3-none-//')
"$DISTVENV/bin/auditwheel" show "$wheel" >"$tmp/show" 2>&1 || { cat "$tmp/show"; die "auditwheel show failed"; }
grep -q "consistent with" "$tmp/show" && tr '\n' ' ' <"$tmp/show" | grep -q "\"$plat\"" ||
  { cat "$tmp/show"; die "auditwheel does not agree with $plat"; }
echo "ok: $plat"

step "the sdist refuses to build by itself"
if env -u BOXLITE_BUILD_DIR "$DISTVENV/bin/pip" wheel --no-deps --no-build-isolation -w "$tmp/sdist-out" "$sdist" >"$tmp/sdist.log" 2>&1; then
  die "a wheel was built from the sdist without the native parts"
fi
grep -q "cannot be built by itself" "$tmp/sdist.log" || { tail -20 "$tmp/sdist.log"; die "the sdist's refusal does not say why"; }
echo "ok: $(grep -o 'boxlite-go: this source distribution cannot be built by itself' "$tmp/sdist.log" | head -1)"

# cffi (the one dependency) for each Python, from PyPI once, kept in the cache.
cache=$BOXLITE_DISTBUILD/pypi-cache
mkdir -p "$cache"
for py in $PYTHONS; do
  v=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
  ls "$cache"/cffi-*-cp"$v"-*manylinux*x86_64*.whl >/dev/null 2>&1 ||
    "$DISTVENV/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: --python-version "$v" \
      --platform manylinux2014_x86_64 --dest "$cache" cffi
done
start_index "$tmp/index" "$wheel" "$sdist" "$cache"/*.whl

home=$tmp/home
export BOXLITE_HOME=$home
unset BOXLITE_ASSETS BOXLITE_LIB BOXLITE_BUILD_DIR PYTHONPATH VIRTUAL_ENV || true
first=1
for py in $PYTHONS; do
  v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  proj=$tmp/proj-$v
  mkdir -p "$proj" "$tmp/bin-$v"
  ln -s "$py" "$tmp/bin-$v/python3"
  step "Python $v ($py): the README's install snippet, pip from the loopback index"
  # The README's snippet for the first Python, bindings/python/README.md's for the others.
  if [ $first = 1 ]; then snippet "$repo/README.md" pip-install >"$proj/install.sh"
  else snippet "$repo/bindings/python/README.md" pip-install >"$proj/install.sh"; fi
  t0=$(date +%s)
  (cd "$proj" && PATH="$tmp/bin-$v:$PATH" PIP_INDEX_URL="$INDEX/simple" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    sh -eu install.sh) >"$proj/install.log" 2>&1 || { tail -20 "$proj/install.log"; die "pip install failed"; }
  grep -E "Successfully installed" "$proj/install.log"
  echo "installed in $(($(date +%s) - t0)) s"
  vpy=$proj/.venv/bin/python
  "$vpy" -c 'import boxlite, os; assert "/.venv/" in boxlite.__file__, boxlite.__file__; print("boxlite from", os.path.dirname(boxlite.__file__))'
  if [ $first = 1 ]; then
    "$vpy" -c 'import asyncio, sys, boxlite
async def main():
    rt = boxlite.Boxlite.default()
    for p in sys.argv[1:]:
        await rt.images.load(p)
asyncio.run(main())' "$PYTHON_IMAGE" "$ALPINE_IMAGE"
  fi

  step "Python $v: the README's CodeBox example"
  snippet "$repo/README.md" python-codebox >"$proj/codebox.py"
  t0=$(date +%s)
  expect "$proj" "$proj/codebox.out" '^42$' timeout 600 "$vpy" codebox.py
  grep -q "ValueError: boom" "$proj/codebox.out" || die "the CodeBox example's failing exec gave no traceback"
  echo "ok: 42, in $(($(date +%s) - t0)) s"

  if [ $first = 1 ]; then
    step "Python $v: the README's SimpleBox example"
    snippet "$repo/README.md" python-simplebox >"$proj/simplebox.py"
    expect "$proj" "$proj/simplebox.out" '^3 hi$' timeout 600 "$vpy" simplebox.py
    step "Python $v: a volume (the wheel's virtiofsd, in the VMM's jail)"
    mkdir -p "$tmp/vol" && echo "from the host" >"$tmp/vol/f"
    cat >"$proj/volume.py" <<'EOF'
import asyncio, sys, boxlite
async def main():
    async with boxlite.SimpleBox(image="alpine:latest", volumes=[(sys.argv[1], "/data", True)]) as box:
        r = await box.exec("cat", "/data/f")
        print(r.exit_code, r.stdout.strip())
        print(r.stderr, file=sys.stderr)
asyncio.run(main())
EOF
    expect "$proj" "$proj/volume.out" '^0 from the host$' timeout 600 "$vpy" volume.py "$tmp/vol"
    step "Python $v: bindings/python/README.md's first example"
    snippet "$repo/bindings/python/README.md" python-hello >"$proj/hello.py"
    expect "$proj" "$proj/hello.out" '^Hello from a microVM!$' timeout 600 "$vpy" hello.py
  fi

  step "Python $v: mypy --strict on the typed example, against the installed package"
  "$DISTVENV/bin/mypy" --strict --no-incremental --python-executable "$vpy" "$repo/bindings/python/examples/typed.py"
  cat >"$proj/reveal.py" <<'EOF'
from boxlite import CodeBox, InteractiveBox, SimpleBox, SyncCodeBox, SyncSimpleBox
async def f() -> None:
    async with CodeBox() as cb:
        reveal_type(cb)
    async with InteractiveBox("alpine:latest") as ib:
        reveal_type(ib)
    async with SimpleBox("alpine:latest") as sb:
        reveal_type(sb)
def g() -> None:
    with SyncCodeBox() as scb:
        reveal_type(scb)
        reveal_type(scb.run("1"))
    with SyncSimpleBox("alpine:latest") as ssb:
        reveal_type(ssb)
EOF
  "$DISTVENV/bin/mypy" --strict --no-incremental --python-executable "$vpy" "$proj/reveal.py" >"$proj/reveal.out" 2>&1 || true
  for want in boxlite.codebox.CodeBox boxlite.interactivebox.InteractiveBox boxlite.simplebox.SimpleBox \
    boxlite.sync_api.SyncCodeBox builtins.str boxlite.sync_api.SyncSimpleBox; do
    grep -q "Revealed type is \"$want\"" "$proj/reveal.out" || { cat "$proj/reveal.out"; die "mypy does not reveal $want"; }
  done
  "$vpy" "$here/sync_types.py"
  echo "ok: mypy --strict"
  first=0
done
step "python: all passed"
