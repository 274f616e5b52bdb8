#!/bin/sh
# fetch-kernel.sh OUTDIR: fetch the pinned Debian cloud kernel and put what the
# guest needs in OUTDIR: vmlinuz, modules/*.ko (flat) and kernel.version.
# Idempotent: does nothing when OUTDIR already holds this kernel.
# Needs apt-get and dpkg (Debian), and apt lists that know the package.
set -eu

KVER=6.1.0-57-cloud-amd64
PKG=linux-image-$KVER
# Modules the agent loads (guest/agent/modules.go); ext4 and devtmpfs are built in.
MODULES="virtio_ring virtio virtio_mmio virtio_blk virtio_console overlay pvpanic pvpanic-mmio failover net_failover virtio_net fuse virtiofs virtio_balloon"

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1

done_already() {
	[ -f "$out/kernel.version" ] && [ "$(cat "$out/kernel.version")" = "$KVER" ] && [ -s "$out/vmlinuz" ] || return 1
	for m in $MODULES; do [ -s "$out/modules/$m.ko" ] || return 1; done
}
if done_already; then
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# Running as root, apt downloads unsandboxed; say so explicitly to keep it quiet.
dl() { (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$PKG"); }
if ! dl; then
	apt-get update -q
	dl
fi
dpkg -x "$tmp"/"$PKG"_*.deb "$tmp/x"

mkdir -p "$out"
rm -rf "$out/modules.new"
mkdir -p "$out/modules.new"
for m in $MODULES; do
	f=$(find "$tmp/x/lib/modules/$KVER/kernel" -name "$m.ko" | head -n 1)
	[ -n "$f" ] || { echo "$0: module $m not in $PKG" >&2; exit 1; }
	cp "$f" "$out/modules.new/$m.ko"
done
cp "$tmp/x/boot/vmlinuz-$KVER" "$out/vmlinuz.new"
rm -rf "$out/modules"
mv "$out/modules.new" "$out/modules"
mv "$out/vmlinuz.new" "$out/vmlinuz"
echo "$KVER" > "$out/kernel.version.new"
mv "$out/kernel.version.new" "$out/kernel.version"
echo "$0: $PKG in $out"
