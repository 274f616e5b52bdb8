#!/bin/sh
# packaging/sysroot.sh DIR: a Debian 11 (bullseye) root to link release binaries against.
#
# The release's native parts (libboxlite.so, the Node addon, virtiofsd) are linked against
# this root's glibc 2.31 (gcc --sysroot), so they run on any Linux x86_64 with glibc 2.31 or
# later: the wheel's tag is manylinux_2_31. Bullseye is the oldest Debian that
# deb.debian.org still serves (buster, 2.28, moved to archive.debian.org). Made once
# (about a minute) and kept: a second run with the root complete returns at once.
set -eu
# The linker follows a library's symlink inside the sysroot only when it is relative:
# make the absolute ones (/lib64/ld-linux-x86-64.so.2 -> /lib/...) relative.
relink() {
  find "$1/usr/lib" "$1/usr/lib64" -type l -lname '/*' | while read -r l; do
    t=$(readlink "$l")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$1$t")" "$l"
  done
}
dir=$1
[ -f "$dir/.complete" ] && exit 0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rm -rf "$dir" "$dir.tmp"
mkdir -p "$(dirname "$dir")"
debootstrap --variant=minbase --include=libc6-dev,libseccomp-dev,libcap-ng-dev,linux-libc-dev \
  bullseye "$dir.tmp" "$mirror" >"$dir.log" 2>&1 || { tail -20 "$dir.log"; echo "sysroot: debootstrap bullseye failed (log: $dir.log)" >&2; exit 1; }
rm -rf "$dir.tmp/var/cache/apt/archives"/*.deb
relink "$dir.tmp"
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
