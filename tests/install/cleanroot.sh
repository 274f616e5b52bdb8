#!/bin/sh
# tests/install/cleanroot.sh: the released packages in a clean Debian 12 (make test-install-cleanroot).
# A debootstrapped bookworm (tests/install/mkroot.sh, cached in build/dist/cleanroot-bookworm)
# with Debian's python3-venv, nodejs and npm and what boxes need (qemu-system-x86, e2fsprogs),
# and no gcc, Go or Rust. As root in a chroot of it (bound onto itself: "/" must be a mount
# point), with /proc, /sys and /dev of the host (the
# VMM's jail makes namespaces and cgroups; QEMU wants /dev/kvm when it can use it), and the
# test images bound read-only under /mnt/images:
#   - the README's pip install snippet from the loopback index (tests/install/index.py), then
#     the README's CodeBox example: prints 42;
#   - the README's npm install snippet from the loopback registry in a fresh project (the install
#     script takes the prebuilt addon: there is no compiler), then the README's ESM example.
# Needs: BOXLITE_DIST, BOXLITE_DISTBUILD, DISTVENV (pip), PYTHON_IMAGE, ALPINE_IMAGE; root.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
: "${BOXLITE_DIST:?}" "${BOXLITE_DISTBUILD:?}" "${DISTVENV:?}" "${PYTHON_IMAGE:?}" "${ALPINE_IMAGE:?}"
[ "$(id -u)" = 0 ] || die "the clean-root test needs root (debootstrap, chroot, mounts)"
wheel=$(one "$BOXLITE_DIST"/boxlite_go-*-manylinux_*_x86_64.whl)
tgz=$(one "$BOXLITE_DIST"/boxlite-go-*.tgz)
root=$BOXLITE_DISTBUILD/cleanroot-bookworm

step "the clean Debian 12 root ($root)"
t0=$(date +%s)
"$here/mkroot.sh" "$root"
echo "ready in $(($(date +%s) - t0)) s (made once, then kept)"

# One test at a time in the root: its mounts are shared.
exec 9>"$root.lock"
flock -w 1800 9 || die "another clean-root test holds $root.lock"
tmp=$(mktemp -d /tmp/boxlite-install-root.XXXXXX)
mounted=""
cleanup() {
  stop_index
  for m in $mounted; do umount -R -l "$m" 2>/dev/null || true; done
  rm -rf "$root/tmp/t" "$tmp"
}
trap cleanup EXIT INT TERM
bind() { # bind HOST INSIDE [ro]
  mkdir -p "$root$2"
  mount --rbind "$1" "$root$2"
  mount --make-rslave "$root$2"
  mounted="$root$2 $mounted"
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$root$2"
  return 0
}
# The root is a mount point of its own, as a container's or a machine's is: the VMM's jail makes
# "/" private in its mount namespace, which fails (EINVAL) where "/" is a plain directory.
mount --bind "$root" "$root" && mounted="$root"
mount -t proc proc "$root/proc" && mounted="$root/proc $mounted"
bind /sys /sys
bind /dev /dev
[ "$(dirname "$PYTHON_IMAGE")" = "$(dirname "$ALPINE_IMAGE")" ] || die "the test images are not in one directory"
bind "$(dirname "$PYTHON_IMAGE")" /mnt/images ro

for tool in gcc cc go rustc cargo; do
  if chroot "$root" sh -c "command -v $tool" >/dev/null 2>&1; then die "the clean root has $tool"; fi
done
echo "no gcc, go, rustc or cargo in the root; $(chroot "$root" python3 --version), node $(chroot "$root" node --version), npm $(chroot "$root" npm --version)"

# cffi for the root's Python, from PyPI once (the cache python.sh fills too).
cache=$BOXLITE_DISTBUILD/pypi-cache
mkdir -p "$cache"
v=$(chroot "$root" python3 -c 'import sys; print("%d%d" % sys.version_info[:2])')
ls "$cache"/cffi-*-cp"$v"-*manylinux*x86_64*.whl >/dev/null 2>&1 ||
  "$DISTVENV/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: --python-version "$v" \
    --platform manylinux2014_x86_64 --dest "$cache" cffi
start_index "$tmp/index" "$wheel" "$tgz" "$cache"/*.whl

mkdir -p "$root/tmp/t/py" "$root/tmp/t/node"
snippet "$repo/README.md" pip-install >"$root/tmp/t/py/install.sh"
snippet "$repo/README.md" python-codebox >"$root/tmp/t/py/codebox.py"
snippet "$repo/bindings/node/README.md" npm-install >"$root/tmp/t/node/install.sh"  # node.sh runs the README's
snippet "$repo/bindings/node/README.md" node-esm >"$root/tmp/t/node/esm.mjs"
echo '{ "name": "app", "private": true, "type": "module" }' >"$root/tmp/t/node/package.json"
run() { # run DIR SCRIPT: sh -eu -c SCRIPT in the root, in DIR, with a clean environment
  chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 \
    BOXLITE_HOME=/tmp/t/home PIP_INDEX_URL="$INDEX/simple" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    npm_config_registry="$INDEX/npm/" npm_config_cache=/tmp/t/npm-cache npm_config_audit=false npm_config_fund=false \
    npm_config_update_notifier=false npm_config_foreground_scripts=true \
    sh -eu -c "cd $1 && $2"
}

step "Python in the root: the README's pip install snippet"
t0=$(date +%s)
run /tmp/t/py 'sh -eu install.sh' >"$tmp/py-install.log" 2>&1 || { tail -30 "$tmp/py-install.log"; die "pip install failed in the root"; }
grep "Successfully installed" "$tmp/py-install.log"
echo "installed in $(($(date +%s) - t0)) s"
cat >"$root/tmp/t/py/load.py" <<'EOF'
import asyncio, sys, boxlite
async def main():
    rt = boxlite.Boxlite.default()
    for p in sys.argv[1:]:
        await rt.images.load(p)
asyncio.run(main())
EOF
run /tmp/t/py ".venv/bin/python load.py /mnt/images/$(basename "$PYTHON_IMAGE") /mnt/images/$(basename "$ALPINE_IMAGE")"

step "Python in the root: the README's CodeBox example"
t0=$(date +%s)
expect "$tmp" "$tmp/codebox.out" '^42$' run /tmp/t/py 'timeout 600 .venv/bin/python codebox.py'
echo "ok: 42, in $(($(date +%s) - t0)) s"

step "Node in the root: the README's npm install snippet, in a fresh project"
t0=$(date +%s)
run /tmp/t/node 'sh -eux install.sh' >"$tmp/npm-install.log" 2>&1 || { cat "$tmp/npm-install.log"; die "npm install failed in the root"; }
grep -q "using the prebuilt addon" "$tmp/npm-install.log" || { cat "$tmp/npm-install.log"; die "the install did not take the prebuilt addon"; }
echo "ok: installed in $(($(date +%s) - t0)) s, with the prebuilt addon"

step "Node in the root: the README's ESM example"
t0=$(date +%s)
expect "$tmp" "$tmp/esm.out" '^3 hello' run /tmp/t/node 'timeout 600 node esm.mjs'
echo "ok, in $(($(date +%s) - t0)) s"
step "clean root: all passed"
