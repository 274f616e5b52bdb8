#!/bin/sh
# mkinitramfs.sh AGENT MODULES_DIR OUT: build the guest initramfs, a newc cpio
# with /init = AGENT (a static boxlite-agent) and MODULES_DIR/*.ko in
# /lib/modules (none for a kernel with everything built in). Reproducible: sorted entries, owner 0:0, mtime 0.
# BOXLITE_INITRAMFS_COMPRESS=gzip compresses it; the default is none, which
# boots faster under TCG (decompression is emulated) and costs only disk.
set -eu

[ $# -eq 3 ] || { echo "usage: $0 AGENT MODULES_DIR OUT" >&2; exit 2; }
agent=$1 mods=$2 out=$3
compress=${BOXLITE_INITRAMFS_COMPRESS:-none}
command -v cpio >/dev/null || { echo "$0: cpio is missing (apt-get install -y cpio)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage" "$out.tmp"' EXIT INT TERM
mkdir -p "$stage/dev" "$stage/proc" "$stage/sys" "$stage/run" "$stage/tmp" "$stage/lib/modules"
cp "$agent" "$stage/init"
[ -d "$mods" ] || { echo "$0: $mods: no such directory" >&2; exit 1; }
for m in "$mods"/*.ko; do
	[ -e "$m" ] || continue
	cp "$m" "$stage/lib/modules/"
done
find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -type f -exec chmod 0644 {} +
chmod 0755 "$stage/init"
chmod 1777 "$stage/tmp"
find "$stage" -exec touch -h -d @0 {} +

(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) > "$out.tmp"
case $compress in
none) ;;
gzip) gzip -9n < "$out.tmp" > "$out.tmp.gz" && mv "$out.tmp.gz" "$out.tmp" ;;
*) echo "$0: BOXLITE_INITRAMFS_COMPRESS=$compress: want none or gzip" >&2; exit 2 ;;
esac
mv "$out.tmp" "$out"
