#!/bin/sh
# packaging/native.sh SYSROOT BUILD OUT [PART...]: the native parts of the release, linked
# against the Debian 11 root SYSROOT (glibc 2.31, see sysroot.sh) so that they run on any
# Linux x86_64 with glibc 2.31 or later, into OUT:
#   libboxlite.so             the C ABI (cgo: linked against SYSROOT's glibc)
#   boxlite-shim, boxlite-net static Go executables (no cgo: no glibc at all)
#   virtiofsd                 the pinned release from crates.io, linked as libboxlite.so
#   boxlite.node              the Node addon, prebuilt (npm installs need no compiler)
#   guest/vmlinuz, guest/initramfs.cpio   copied from BUILD (make build)
# PARTs (default: all): lib go virtiofsd addon guest. Run from the repository root.
set -eu
sysroot=$(realpath "$1") build=$(realpath "$2") out=$3
shift 3
parts=${*:-lib go virtiofsd addon guest}
VIRTIOFSD_VERSION=${VIRTIOFSD_VERSION:-1.14.0}
[ -f "$sysroot/.complete" ] || { echo "native: no sysroot at $sysroot (packaging/sysroot.sh)" >&2; exit 1; }
libdir=$sysroot/usr/lib/x86_64-linux-gnu
# gcc searches its own library directories before the sysroot's; -B and -L put the
# sysroot's crt files and libc first, so the result asks for glibc 2.31's symbol versions.
cc="gcc --sysroot=$sysroot -B$libdir/ -L$libdir"
mkdir -p "$out/guest"
for part in $parts; do
  case $part in
  lib)
    CGO_ENABLED=1 CC="$cc" go build -trimpath -ldflags '-s -w' -buildmode=c-shared -o "$out/libboxlite.so" ./capi
    rm -f "$out/libboxlite.h" ;;
  go)
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out/boxlite-shim" ./cmd/boxlite-shim
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out/boxlite-net" ./cmd/boxlite-net ;;
  virtiofsd)
    # cargo's linker is gcc: give it the same sysroot. libseccomp and libcap-ng come from it
    # too, linked in statically: the jail runs virtiofsd from its own root, where libraries
    # beside it (auditwheel's grafts) would not be found; glibc stays shared.
    link=""
    for a in --sysroot=$sysroot -B$libdir/ -L$libdir; do link="$link -C link-arg=$a"; done
    LIBSECCOMP_LINK_TYPE=static LIBSECCOMP_LIB_PATH=$libdir LIBCAPNG_LINK_TYPE=static LIBCAPNG_LIB_PATH=$libdir \
      RUSTFLAGS="$link -C strip=symbols" cargo install --force --locked --quiet virtiofsd --version "$VIRTIOFSD_VERSION" \
      --root "$out.cargo"
    cp "$out.cargo/bin/virtiofsd" "$out/virtiofsd" ;;
  addon)
    $cc -shared -fPIC -O2 -std=gnu11 -fvisibility=hidden -I bindings/node/src/napi -I include \
      bindings/node/src/*.c -L "$out" -lboxlite -lpthread -Wl,-rpath,'$ORIGIN' -Wl,--as-needed \
      -o "$out/boxlite.node"
    # The addon needs the library by its SONAME, if it has one: that file must be what ships.
    for n in $(readelf -d "$out/boxlite.node" | sed -n 's/.*NEEDED.*\[\(libboxlite[^]]*\)\].*/\1/p'); do
      [ -f "$out/$n" ] || { echo "native: the addon needs $n, which is not in $out (a SONAME?)" >&2; exit 1; }
    done ;;
  guest)
    for f in guest/vmlinuz guest/initramfs.cpio; do
      [ -f "$build/$f" ] || { echo "native: $build/$f missing (make build)" >&2; exit 1; }
      cp "$build/$f" "$out/$f"
    done ;;
  *) echo "native: unknown part $part" >&2; exit 1 ;;
  esac
done
