#!/bin/sh
# ctest's install test: `cmake --install` into a temporary prefix, then a
# program built against that prefix as a user builds one (pkg-config, no
# flags of ours) runs a box with a volume, with no BOXLITE_ASSETS: the
# library finds what it needs in the prefix. Checks the SONAME, the
# program's NEEDED and RUNPATH, and that every asset is installed; then the
# README's C program, as it is, built and run the same way.
#   install_test.sh CMAKE_BINARY_DIR install_check.c README.md   (BOXLITE_TEST_IMAGE set)
set -eu
bin=$1 src=$2 readme=$3
: "${BOXLITE_TEST_IMAGE:?needs BOXLITE_TEST_IMAGE (run make test-c)}"
tmp=$(mktemp -d /tmp/boxlite-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$bin" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$tmp/prefix" -name boxlite.pc)
[ -n "$pc" ] || fail "no boxlite.pc installed"
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir boxlite)
case $libdir in "$tmp/prefix"/*) ;; *) fail "boxlite.pc's libdir $libdir is not in the prefix" ;; esac
for f in libboxlite.so libboxlite.so.0 boxlite/boxlite-shim boxlite/boxlite-net boxlite/virtiofsd boxlite/guest/vmlinuz boxlite/guest/initramfs.cpio; do
  [ -e "$libdir/$f" ] || fail "$f not installed in $libdir"
done
[ -f "$tmp/prefix/include/boxlite.h" ] || fail "boxlite.h not installed"
soname=$(readelf -d "$libdir/libboxlite.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libboxlite.so.0 ] || fail "SONAME is '$soname', want libboxlite.so.0"

export PKG_CONFIG_PATH="$(dirname "$pc")"
# shellcheck disable=SC2046 # pkg-config's output is words
cc -Wall -Wextra -Werror -o "$tmp/install_check" "$src" $(pkg-config --cflags --libs boxlite)
needed=$(readelf -d "$tmp/install_check" | sed -n 's/.*(NEEDED).*\[\(libboxlite.*\)\]/\1/p')
[ "$needed" = libboxlite.so.0 ] || fail "the program needs '$needed', want libboxlite.so.0"
readelf -d "$tmp/install_check" | grep -E '(RUNPATH|RPATH).*'"$libdir" >/dev/null || fail "the program has no run path to $libdir"

mkdir -p "$tmp/home" "$tmp/vol"
echo "from the host" >"$tmp/vol/in.txt"
out=$(env -u BOXLITE_ASSETS -u BOXLITE_HOME -u LD_LIBRARY_PATH "$tmp/install_check" "$tmp/home" "$BOXLITE_TEST_IMAGE" "$tmp/vol") ||
  fail "the installed program failed: $out"
echo "$out"
[ "$(echo "$out" | head -n1)" = "from the host" ] || fail "the box read '$out' from the volume"
[ "$(cat "$tmp/vol/out.txt" 2>/dev/null)" = "written in the box" ] || fail "the box's write did not reach the host"

# The README's C quick start: the block marked <!-- test: c-program -->
# (tests/internal/readme), in the home install_check loaded the image into.
snippet() { awk -v m="<!-- test: $2 -->" 'f && /^```/ {exit} f {print} p && /^```/ {f=1} {p = ($0 == m)}' "$1"; }
repo=$(dirname "$readme")
snippet "$repo/README.md" c-program >"$tmp/hello.c"
[ -s "$tmp/hello.c" ] || fail "no block marked <!-- test: c-program --> in the README"
cc -Wall -Werror -o "$tmp/hello" "$tmp/hello.c" $(pkg-config --cflags --libs boxlite) || fail "the README's C program does not build"
out=$(env -u BOXLITE_ASSETS -u LD_LIBRARY_PATH BOXLITE_HOME="$tmp/home" "$tmp/hello") || fail "the README's C program failed: $out"
case $out in "Linux "*) ;; *) fail "the README's C program printed '$out'" ;; esac
echo "install test: ok ($libdir; the README's C program printed: $out)"
