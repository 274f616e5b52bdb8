#!/bin/sh
# tests/install/mkroot.sh DIR: a clean Debian 12 root for the install tests, made once and kept
# (a few minutes; a second run with the root complete returns at once). What a user of the
# released packages needs and nothing more: Debian's python3-venv, nodejs and npm, and what
# boxes need on the host (qemu-system-x86, e2fsprogs). No gcc, Go or Rust: the tests check.
set -eu
dir=$1
[ -f "$dir/.complete" ] && exit 0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rm -rf "$dir" "$dir.tmp"
mkdir -p "$(dirname "$dir")"
log=$dir.log
debootstrap --variant=minbase bookworm "$dir.tmp" "$mirror" >"$log" 2>&1 ||
  { tail -20 "$log"; echo "mkroot: debootstrap bookworm failed (log: $log)" >&2; exit 1; }
cp /etc/resolv.conf "$dir.tmp/etc/resolv.conf"
chroot "$dir.tmp" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  python3-venv nodejs npm qemu-system-x86 e2fsprogs ca-certificates && apt-get clean' >>"$log" 2>&1 ||
  { tail -20 "$log"; echo "mkroot: apt-get in the root failed (log: $log)" >&2; exit 1; }
for tool in gcc cc go rustc cargo; do
  if chroot "$dir.tmp" sh -c "command -v $tool" >/dev/null 2>&1; then
    echo "mkroot: the clean root has $tool" >&2; exit 1
  fi
done
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
