#!/bin/sh
# build.sh OUTDIR: build the boxlite guest kernel from Debian's linux-source
# package (installed by make setup): allnoconfig plus guest/kernel/boxlite.config,
# with the guest/kernel/*.patch fixes applied, laid out in OUTDIR as
# guest/fetch-kernel.sh lays a kernel out: vmlinuz (the bzImage), modules/
# (empty: everything is built in) and kernel.version. The source is unpacked
# once into OUTDIR/../kernel-src/ (kernel-src/version names the package version
# and the patches' hash) and built there in out/, so a changed fragment
# rebuilds only what it touches. OUTDIR/build.key names the source, the
# fragment and this script; a build with the same key does nothing.
# KERNEL_JOBS sets make's -j (default: nproc).
set -eu

PKG=linux-source-6.1
here=$(cd "$(dirname "$0")" && pwd)
frag=$here/boxlite.config

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
top=$(dirname "$out")

ver=$(dpkg-query -W -f='${Version}' "$PKG" 2>/dev/null) || { echo "$0: $PKG is not installed (make setup installs it)" >&2; exit 1; }
patches=$(ls "$here"/*.patch 2>/dev/null || true)
srckey="$ver $(cat $patches /dev/null | sha256sum | cut -c1-16)"
key="$PKG $srckey $(cat "$frag" "$0" | sha256sum | cut -c1-16)"
if [ -f "$out/build.key" ] && [ "$(cat "$out/build.key")" = "$key" ] && [ -s "$out/vmlinuz" ]; then
	exit 0
fi

ksrc=$top/kernel-src
src=$ksrc/$PKG obj=$ksrc/out
if [ "$(cat "$ksrc/version" 2>/dev/null)" != "$srckey" ]; then
	rm -rf "$ksrc" && mkdir -p "$obj"
	tar -xJf "/usr/src/$PKG.tar.xz" -C "$ksrc"
	for p in $patches; do patch -s -p1 -d "$src" < "$p"; done
	echo "$srckey" > "$ksrc/version"
fi
make -s -C "$src" O="$obj" allnoconfig KCONFIG_ALLCONFIG="$frag"
# Kconfig drops what it cannot satisfy without a word: check every option.
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*) opt=${line%%=*} ;;
	"# CONFIG_"*" is not set") opt=${line#"# "} opt=${opt%% *} line="" ;;
	*) continue ;;
	esac
	have=$(grep -E "^$opt=" "$obj/.config" || true)
	if [ "$have" != "$line" ]; then
		echo "$0: $opt: want ${line:-off}, Kconfig gave ${have:-off}" >&2
		bad=1
	fi
done < "$frag"
[ $bad -eq 0 ] || exit 1
make -s -C "$src" O="$obj" -j"${KERNEL_JOBS:-$(nproc)}" bzImage

rm -rf "$out/modules" && mkdir -p "$out/modules"
cp "$obj/arch/x86/boot/bzImage" "$out/vmlinuz.new" && mv "$out/vmlinuz.new" "$out/vmlinuz"
cp "$obj/include/config/kernel.release" "$out/kernel.version"
echo "$key" > "$out/build.key"
echo "$0: $(cat "$out/kernel.version") in $out"
