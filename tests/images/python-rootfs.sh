#!/bin/sh
# python-rootfs.sh OUTDIR: build a Debian root filesystem with Python in OUTDIR.
#
# It is the offline stand-in for the official `python:slim` image in tests:
# Debian bookworm (debootstrap --variant=minbase) with Debian's python3 and
# python3-pip, laid out where programs look for the official image's Python:
# /usr/local/bin/python, python3, python3.X, pip, pip3 (links to Debian's), and
# pip allowed to install into the system Python (Debian's EXTERNALLY-MANAGED
# marker removed, as the official image has none). Give the image the official
# config when packing it (tests/images/python-image.sh does all of this):
#
#   Env  PATH=/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
#        LANG=C.UTF-8 PYTHON_VERSION=<X.Y.Z of the Python inside>
#   WorkingDir /, Cmd ["python3"]
#
# For code contexts (boxlite.CodeContext, E2B's code interpreter) it also has
# Debian's nodejs (javascript contexts) and python3-matplotlib (figures as PNG
# results), installed with apt without recommends; python3-munkres satisfies
# python3-fonttools' "python3-scipy | python3-munkres" without scipy and the
# compilers it pulls in. What they cost (measured 2026-12-07, bookworm): nodejs
# 12 packages, 88 MB installed (libnode108 46 MB, libicu72 36 MB), 20 MB to
# download; matplotlib 76 packages, 223 MB installed (icu again, sympy,
# numpy, unicode-data), 55 MB to download. EXTRA_PACKAGES="" leaves them out.
#
# Apt caches and lists, docs (except copyright files), man and info pages,
# locales and logs are removed. Bytecode is recompiled as checked-hash .pyc
# (PEP 552), so that it stays valid when the packer resets every mtime.
#
# Runs as root (debootstrap, chroot). The mirror is the first of apt's sources
# with $SUITE (default bookworm) and main; MIRROR=URL overrides it. About a minute.
set -eu

out=${1:?usage: python-rootfs.sh OUTDIR}
SUITE=${SUITE:-bookworm}
PACKAGES=python3,python3-pip
EXTRA_PACKAGES=${EXTRA_PACKAGES-nodejs python3-matplotlib python3-munkres}

[ "$(id -u)" = 0 ] || { echo "python-rootfs.sh: debootstrap needs root" >&2; exit 1; }
if ! command -v debootstrap >/dev/null 2>&1; then
	echo "python-rootfs.sh: installing debootstrap" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; }
fi

# mirror prints the URI of the first apt source (deb822 or one-line) that has
# $SUITE and the main component.
mirror() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# deb822: paragraphs of "Key: value" lines.
		awk -v suite="$SUITE" '
			function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && (" " comps " ") ~ / main /) { print uris; exit } types = uris = suites = comps = "" }
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{ key = $1; $1 = ""; sub(/^ +/, ""); if (key == "Types:") types = $0; if (key == "URIs:") uris = $1; if (key == "Suites:") suites = $0; if (key == "Components:") comps = $0 }
			END { flush() }' "$f"
	done
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; if ($(i+1) == suite) { print $i; exit } }'
}
url=${MIRROR:-$(mirror | head -n 1)}
url=${url:-http://deb.debian.org/debian}

case $out in /*) ;; *) out=$PWD/$out ;; esac
[ "$out" != / ] || { echo "python-rootfs.sh: refusing to build in /" >&2; exit 1; }
# debootstrap mounts proc and sys (and may bind /dev) in the target; a run that
# died may have left them there, and rm -rf must not descend into them.
unmount_under() {
	awk -v d="$out/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}
trap unmount_under EXIT
unmount_under
rm -rf "$out"
mkdir -p "$out"
echo "python-rootfs.sh: debootstrap $SUITE from $url" >&2
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$out" "$url" >"$out.debootstrap.log" 2>&1; then
	tail -n 30 "$out.debootstrap.log" >&2
	[ -f "$out/debootstrap/debootstrap.log" ] && tail -n 30 "$out/debootstrap/debootstrap.log" >&2
	exit 1
fi
rm -f "$out.debootstrap.log"
cd "$out"

py=$(readlink -f usr/bin/python3)  # /usr/bin/python3.11
py=${py##*/}

# The official image's layout: Python and pip on PATH in /usr/local/bin.
mkdir -p usr/local/bin
for name in python python3 "$py"; do ln -sfn /usr/bin/python3 "usr/local/bin/$name"; done
for name in pip pip3 "pip${py#python}"; do ln -sfn /usr/bin/pip3 "usr/local/bin/$name"; done
rm -f usr/lib/python3*/EXTERNALLY-MANAGED
chroot . pip --version >/dev/null
if [ -n "$EXTRA_PACKAGES" ]; then
	echo "python-rootfs.sh: apt-get install $EXTRA_PACKAGES" >&2
	cp /etc/resolv.conf etc/resolv.conf
	# shellcheck disable=SC2086 # a list of package names
	if ! { chroot . apt-get update -qq && DEBIAN_FRONTEND=noninteractive chroot . apt-get install -y -qq \
		--no-install-recommends $EXTRA_PACKAGES; } >"$out.apt.log" 2>&1; then
		tail -n 30 "$out.apt.log" >&2
		exit 1
	fi
	rm -f "$out.apt.log"
	case " $EXTRA_PACKAGES " in *" nodejs "*) chroot . node -e 'process.exit(0)' ;; esac
	case " $EXTRA_PACKAGES " in *" python3-matplotlib "*) chroot . python3 -c 'import matplotlib.pyplot' ;; esac
fi

# Small and without traces of the build host, like Debian's slim images.
rm -rf var/cache/apt/* var/lib/apt/lists/* var/cache/debconf/*-old var/lib/dpkg/*-old \
	usr/share/man/* usr/share/info/* usr/share/groff/* usr/share/lintian/* usr/share/linda/* \
	usr/share/locale/* debootstrap dev/* proc/* sys/* run/* tmp/* var/tmp/* \
	etc/machine-id etc/resolv.conf etc/hostname etc/*- var/cache/ldconfig/aux-cache
find usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
find usr/share/doc -mindepth 1 -type d -empty -delete
find var/log -type f -exec truncate -s 0 {} +
echo box >etc/hostname
# The password-change day in /etc/shadow would be the build date: make it
# bookworm's release day (19518, 2023-06-10). 0 would force a change at login.
sed -i 's/^\([^:]*:[^:]*:\)[0-9][0-9]*:/\119518:/' etc/shadow

# Every mtime is reset when packing, which would make Debian's timestamp-based
# .pyc files stale: each box would recompile what it imports (slow under
# emulation) into its writable layer. Checked-hash .pyc files need no mtimes.
find usr/lib -name __pycache__ -type d -prune -exec rm -rf {} +
chroot . python3 -m compileall -q --invalidation-mode checked-hash \
	"/usr/lib/$py" /usr/lib/python3/dist-packages >/dev/null
echo "python-rootfs.sh: $py, $(du -sm . | cut -f1) MB in $out" >&2
