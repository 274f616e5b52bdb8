#!/bin/sh
# What `make` needs, checked before anything is built (the Makefile's setup
# runs this first): every missing prerequisite is listed at once, with how to
# get it, and make stops. As root, Debian packages that are missing are only
# noted: setup installs them next with apt-get.
#   APT_PKGS="..." BUILD=build GO=go mk/check-prereqs.sh
set -u
BUILD=${BUILD:-build}
GO=${GO:-go}
problems=""
problem() { problems="$problems
  - $*"; }
note() { echo "prerequisites: $*"; }
# older A B: version A is older than version B.
older() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$1" ]; }

# Go: go.mod's go line is the toolchain the build needs; a go command of 1.21
# or later fetches it from the module proxy itself (GOTOOLCHAIN=auto).
need=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
backports="https://go.dev/dl/, or on Debian 12 a golang package of bookworm-backports; Debian 12's own golang-go is 1.19"
if ! command -v "$GO" >/dev/null 2>&1; then
  problem "Go is not installed. The build needs Go $need; any Go 1.21 or later fetches it from the module proxy by itself ($backports)"
else
  # Outside the module and with GOTOOLCHAIN=local: the go command's own
  # version, not the one go.mod would switch it to.
  have=$(cd / && GOTOOLCHAIN=local "$GO" env GOVERSION 2>/dev/null); have=${have#go}
  if [ -z "$have" ] || older "$have" 1.21; then
    problem "Go ${have:-of an unknown version} is too old: the build needs Go $need, which a Go 1.21 or later fetches from the module proxy by itself ($backports)"
  elif older "$have" "$need"; then
    case $(cd / && "$GO" env GOTOOLCHAIN) in
    local) problem "Go $have is older than go.mod's $need and GOTOOLCHAIN=local keeps the go command from fetching go$need: unset GOTOOLCHAIN" ;;
    *) note "Go $have: the go command fetches go$need from the module proxy on its first use (GOTOOLCHAIN, about 70 MB)" ;;
    esac
  fi
fi

# virtiofsd (volumes) is built from crates.io, first, so that a Rust that
# cannot build it fails here and not after the kernel.
if [ ! -x "$BUILD/virtiofsd" ]; then
  rustup="install a current Rust with rustup (https://rustup.rs), or put a virtiofsd binary at $BUILD/virtiofsd"
  if ! command -v cargo >/dev/null 2>&1; then
    problem "cargo is missing: the build makes virtiofsd (volumes) with it: $rustup"
  else
    rv=$(rustc --version 2>/dev/null | awk '{print $2}')
    if [ -z "$rv" ] || older "$rv" 1.64; then
      problem "rustc ${rv:-missing} cannot build virtiofsd 1.14.0's dependencies (Debian 12's cargo is 1.63): $rustup"
    fi
  fi
fi

# Debian packages: installed by setup as root; otherwise listed here.
if command -v dpkg >/dev/null 2>&1; then
  missing=""
  for p in ${APT_PKGS:-}; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      note "apt-get will install:$missing"
    else
      problem "Debian packages missing:$missing (run make as root, which installs them, or: sudo apt-get install$missing)"
    fi
  fi
else
  for c in qemu-system-x86_64 busybox mkfs.ext4 cpio cmake cc debootstrap; do
    command -v "$c" >/dev/null 2>&1 || problem "$c is missing (not Debian: install it from your distribution)"
  done
fi

# Disk: build/ grows to about 2 GB (the kernel's build tree most of it), a
# home to about 0.7 GB with the test images.
if [ ! -e "$BUILD/.setup" ]; then
  dir=$BUILD; [ -d "$dir" ] || dir=$(dirname "$BUILD")
  free_kb=$(df -Pk "$dir" 2>/dev/null | awk 'NR==2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt 3000000 ]; then
    problem "$((free_kb / 1024)) MB free where $BUILD goes: the first build needs about 3 GB (build/ about 2 GB, a home about 0.7 GB)"
  fi
fi

if [ -n "$problems" ]; then
  echo "make: missing prerequisites:$problems" >&2
  exit 1
fi
