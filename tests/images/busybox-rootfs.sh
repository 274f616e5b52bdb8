#!/bin/sh
# busybox-rootfs.sh OUTDIR: build a minimal busybox root filesystem in OUTDIR.
#
# It is the offline stand-in for `alpine:latest` in tests: a static busybox
# (Debian's busybox-static, /bin/busybox) with every applet linked, /etc/passwd
# with root and box (uid 1000), and the usual empty mount points. Package it
# with tests/images/mkimage, which makes every file owned by root and gives all
# files one mtime, so the image is reproducible:
#
#   sh tests/images/busybox-rootfs.sh /tmp/rootfs
#   go run ./tests/images/mkimage -name alpine:latest -rootfs /tmp/rootfs \
#     -chown /home/box=1000:1000 -env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
#     -workdir / -cmd /bin/sh -o alpine.tar
#
# BUSYBOX=/path/to/busybox overrides the binary; it must be statically linked.
set -eu

out=${1:?usage: busybox-rootfs.sh OUTDIR}
busybox=${BUSYBOX:-/bin/busybox}

[ -x "$busybox" ] || { echo "busybox-rootfs.sh: $busybox not found (apt-get install busybox-static)" >&2; exit 1; }
if command -v file >/dev/null 2>&1 && ! file -L "$busybox" | grep -q 'statically linked'; then
	echo "busybox-rootfs.sh: $busybox is not statically linked (apt-get install busybox-static)" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$out"
cd "$out"
umask 022

mkdir -p bin sbin usr/bin usr/sbin etc root home/box proc sys dev tmp run var/tmp
chmod 700 root
chmod 1777 tmp var/tmp
cp "$busybox" bin/busybox
chmod 755 bin/busybox

# One symlink per applet, at the path busybox itself reports (bin/sh, usr/bin/env, ...).
# Targets are relative, so they resolve inside the rootfs wherever it is mounted.
"$busybox" --list-full | LC_ALL=C sort | while read -r applet; do
	[ "$applet" = bin/busybox ] && continue
	case $applet in
	bin/*) target=busybox ;;
	*/*/*) target=../../bin/busybox ;;
	*/*) target=../bin/busybox ;;
	*) target=bin/busybox ;;
	esac
	case $applet in */*) mkdir -p "${applet%/*}" ;; esac
	ln -sfn "$target" "$applet"
done

# Debian's busybox has no nohup applet; Alpine's has, and programs written
# for it start servers with `nohup srv >log 2>&1 &`. POSIX's, in sh.
if [ ! -e usr/bin/nohup ] && [ ! -e bin/nohup ]; then
	cat >usr/bin/nohup <<'NOHUP'
#!/bin/sh
# nohup COMMAND [ARG...]: run COMMAND immune to hangups; output that would go
# to a terminal goes to nohup.out (POSIX), as Alpine's busybox nohup does.
[ $# -gt 0 ] || { echo "usage: nohup COMMAND [ARG...]" >&2; exit 127; }
trap '' HUP
if [ -t 1 ]; then
	exec >>nohup.out 2>&1 || exec >>"$HOME/nohup.out" 2>&1 || exit 127
	echo "nohup: appending output to nohup.out" >&2
fi
[ -t 2 ] && exec 2>&1
exec "$@"
NOHUP
	chmod 755 usr/bin/nohup
fi

cat >etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
box:x:1000:1000:box:/home/box:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >etc/group <<'GROUP'
root:x:0:
box:x:1000:
nogroup:x:65534:
GROUP
cat >etc/shadow <<'SHADOW'
root:*:19000:0:99999:7:::
box:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
SHADOW
chmod 640 etc/shadow
echo box >etc/hostname
cat >etc/hosts <<'HOSTS'
127.0.0.1	localhost box
::1	localhost ip6-localhost ip6-loopback
HOSTS
cat >etc/os-release <<OSRELEASE
NAME="BusyBox"
ID=busybox
VERSION_ID="$("$busybox" 2>&1 | head -n 1 | sed -n 's/^BusyBox v\([^ ]*\).*/\1/p')"
PRETTY_NAME="BusyBox (boxlite test stand-in for alpine:latest)"
OSRELEASE
