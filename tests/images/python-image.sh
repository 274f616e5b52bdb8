#!/bin/sh
# python-image.sh OUT.tar: the `python:slim` test image as a docker archive,
# built offline by python-rootfs.sh and packed by mkimage with the official
# image's config; see python-rootfs.sh for what is in it.
#
# The archive is cached by content: CACHE/python-slim-<key>.tar, where the key
# hashes this script, python-rootfs.sh, mkimage's source and the version of
# go-containerregistry it uses, the Debian suite and the architecture. When
# nothing changed, OUT.tar is a hard link to the cached archive at once;
# otherwise the image is built (about a minute; root) and older cached ones go.
# The key does not cover the mirror's content: Debian point releases reach the
# image only when the cache is removed (rm -rf CACHE) or a key input changes.
#
# CACHE defaults to the directory of OUT.tar plus /cache; GO to go.
set -eu

out=${1:?usage: python-image.sh OUT.tar}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SUITE=${SUITE:-bookworm}
export SUITE
cache=${CACHE:-$(dirname "$out")/cache}
GO=${GO:-go}

key=$({
	cat "$here/python-image.sh" "$here/python-rootfs.sh" "$here"/mkimage/*.go
	grep 'google/go-containerregistry ' "$repo/go.sum" || true
	echo "$SUITE $(uname -m)"
} | sha256sum | cut -c1-16)
cached=$cache/python-slim-$key.tar

if [ ! -s "$cached" ]; then
	mkdir -p "$cache"
	start=$(date +%s)
	rootfs=$(cd "$cache" && pwd)/python-rootfs.tmp
	cleanup() {
		# Never rm -rf into what debootstrap may have left mounted there (proc, sys, a bound /dev).
		awk -v d="$rootfs/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m"
		done
		rm -rf "$rootfs" "$cached.tmp"
	}
	trap cleanup EXIT
	trap 'exit 1' INT TERM
	sh "$here/python-rootfs.sh" "$rootfs"
	version=$(chroot "$rootfs" python3 -c 'import platform; print(platform.python_version())')
	(cd "$repo" && "$GO" run ./tests/images/mkimage -name python:slim -rootfs "$rootfs" -keep-owners \
		-env PATH=/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		-env LANG=C.UTF-8 -env PYTHON_VERSION="$version" -workdir / -cmd python3 -o "$cached.tmp")
	mv "$cached.tmp" "$cached"
	for old in "$cache"/python-slim-*.tar; do
		[ "$old" = "$cached" ] || rm -f "$old"
	done
	echo "python-image.sh: built python:slim (Python $version) in $(($(date +%s) - start)) s" >&2
fi
if [ ! "$out" -ef "$cached" ]; then
	mkdir -p "$(dirname "$out")"
	rm -f "$out"
	ln "$cached" "$out" 2>/dev/null || cp "$cached" "$out"
fi
