# boxlite: `make demo` boots a box and runs a command in it; `make test` runs the tests.
# Every target installs what it needs (Debian packages as root, Go modules, the guest kernel).

GO      ?= go
BUILD   := $(CURDIR)/build
GUEST   := $(BUILD)/guest
# The guest kernel: GUEST_KERNEL=boxlite (the default) is built here from Debian's
# linux-source with guest/kernel/boxlite.config, everything built in; GUEST_KERNEL=debian
# is Debian's cloud kernel, pinned in guest/fetch-kernel.sh, which is always fetched too
# (the bench's baseline, and some tests read its modules). The chosen one is copied to
# guest/kernel/; boxes boot guest/vmlinuz, its uncompressed vmlinux (an ELF, despite the
# name the SDKs ship it under).
GUEST_KERNEL ?= boxlite
KERNEL_PKGS  := linux-source-6.1 bc flex bison libelf-dev
APT_PKGS   := qemu-system-x86 busybox-static e2fsprogs cpio debootstrap cmake gcc libseccomp-dev libcap-ng-dev tmux containerd containernetworking-plugins $(KERNEL_PKGS)
# A home of our own, so demo and tests never touch ~/.boxlite.
export BOXLITE_HOME   ?= $(BUILD)/home
export BOXLITE_ASSETS := $(BUILD)

GO_SRC := $(shell find . -name '*.go' -not -path './build/*') $(wildcard internal/session/*.py) go.mod go.sum

.PHONY: all setup build lib images demo test test-go test-c test-rust test-node test-python test-rest-sdk python node bench soak vet fmt clean FORCE
all: build

setup: $(BUILD)/.setup
$(BUILD)/.setup: Makefile mk/check-prereqs.sh
	@APT_PKGS="$(APT_PKGS)" BUILD="$(BUILD)" GO="$(GO)" mk/check-prereqs.sh
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	$(GO) mod download
	@mkdir -p $(BUILD) && touch $@

DEBIAN_KERNEL  := $(GUEST)/debian-kernel
BOXLITE_KERNEL := $(GUEST)/boxlite-kernel
ifeq ($(GUEST_KERNEL),boxlite)
KERNEL_DIR := $(BOXLITE_KERNEL)
else ifeq ($(GUEST_KERNEL),debian)
KERNEL_DIR := $(DEBIAN_KERNEL)
else
$(error GUEST_KERNEL=$(GUEST_KERNEL): want boxlite or debian)
endif

$(DEBIAN_KERNEL)/vmlinuz: guest/fetch-kernel.sh | $(BUILD)/.setup
	guest/fetch-kernel.sh $(DEBIAN_KERNEL)

# The first build took 20 minutes on 2 busy cores (docs/NOTES.md); later ones find it cached
# (guest/kernel/build.sh keys it on the source version and the config, and
# returns at once when neither changed: hence FORCE).
$(BOXLITE_KERNEL)/vmlinuz: FORCE | $(BUILD)/.setup
	guest/kernel/build.sh $(BOXLITE_KERNEL)

# FORCE'd so that a changed GUEST_KERNEL takes effect; the copy (and so what
# depends on it) is made only when the chosen kernel differs from it.
$(GUEST)/kernel/vmlinuz: $(KERNEL_DIR)/vmlinuz $(DEBIAN_KERNEL)/vmlinuz FORCE
	@if ! cmp -s $(KERNEL_DIR)/vmlinuz $@ || ! cmp -s $(KERNEL_DIR)/kernel.version $(GUEST)/kernel/kernel.version; then \
	  echo "guest kernel: $(GUEST_KERNEL) ($$(cat $(KERNEL_DIR)/kernel.version))"; \
	  rm -rf $(GUEST)/kernel.new && mkdir -p $(GUEST)/kernel.new && \
	  cp -r $(KERNEL_DIR)/modules $(KERNEL_DIR)/kernel.version $(KERNEL_DIR)/vmlinuz $(GUEST)/kernel.new/ && \
	  rm -rf $(GUEST)/kernel && mv $(GUEST)/kernel.new $(GUEST)/kernel; \
	fi

$(BUILD)/boxlite-agent: $(GO_SRC) | $(BUILD)/.setup
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./cmd/boxlite-agent

$(GUEST)/initramfs.cpio: $(BUILD)/boxlite-agent $(GUEST)/kernel/vmlinuz guest/mkinitramfs.sh
	guest/mkinitramfs.sh $(BUILD)/boxlite-agent $(GUEST)/kernel/modules $@

# The bench's baseline boots Debian's bzImage with this one (its modules).
$(DEBIAN_KERNEL)/initramfs.cpio: $(BUILD)/boxlite-agent $(DEBIAN_KERNEL)/vmlinuz guest/mkinitramfs.sh
	guest/mkinitramfs.sh $(BUILD)/boxlite-agent $(DEBIAN_KERNEL)/modules $@

# Boxes boot the kernel uncompressed, through its PVH entry (no emulated
# decompression); kernel/vmlinuz stays the bzImage.
$(GUEST)/kernel/vmlinux: $(GUEST)/kernel/vmlinuz $(wildcard guest/internal/pvhkernel/*.go)
	$(GO) run ./guest/internal/pvhkernel $< $@

$(GUEST)/vmlinuz: $(GUEST)/kernel/vmlinux
	cp $< $@

$(BUILD)/boxlite $(BUILD)/boxlite-shim $(BUILD)/boxlite-net $(BUILD)/containerd-shim-boxlite-v2: $(GO_SRC) | $(BUILD)/.setup
	$(GO) build -o $(BUILD)/boxlite ./cmd/boxlite
	$(GO) build -o $(BUILD)/boxlite-shim ./cmd/boxlite-shim
	$(GO) build -o $(BUILD)/boxlite-net ./cmd/boxlite-net
	$(GO) build -o $(BUILD)/containerd-shim-boxlite-v2 ./cmd/containerd-shim-boxlite-v2

# crictl (cri-tools is not in Debian 12) drives containerd's CRI in tests/containerd,
# as the kubelet would.
CRICTL_VERSION := v1.37.0
$(BUILD)/crictl: | $(BUILD)/.setup
	GOBIN=$(BUILD) $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION)

$(BUILD)/libboxlite.so: $(GO_SRC) include/boxlite.h capi/capi.h | $(BUILD)/.setup
	$(GO) build -buildmode=c-shared -o $@ ./capi

# virtiofsd serves a box's volumes (host folders over virtio-fs). It is not in Debian
# bookworm: build the pinned release from crates.io against Debian's libseccomp and
# libcap-ng, once (about 4 minutes on 2 cores); later makes find it in build/. Its
# dependencies want a newer Rust than bookworm's 1.63: a rustup cargo on PATH.
VIRTIOFSD_VERSION := 1.14.0
# mk/check-prereqs.sh refuses a missing or too old cargo (Debian's) before anything is built,
# and build makes virtiofsd first, so that a failure comes before the kernel's 20 minutes.
$(BUILD)/virtiofsd: | $(BUILD)/.setup
	cargo install --locked --quiet virtiofsd --version $(VIRTIOFSD_VERSION) --root $(BUILD)/cargo-virtiofsd || \
	  { echo "virtiofsd $(VIRTIOFSD_VERSION) did not build with $$(cargo --version): install a current Rust with rustup (https://rustup.rs), or put a virtiofsd binary at $@"; exit 1; }
	cp $(BUILD)/cargo-virtiofsd/bin/virtiofsd $@.tmp && mv $@.tmp $@

build: $(BUILD)/virtiofsd $(BUILD)/boxlite $(BUILD)/boxlite-shim $(BUILD)/boxlite-net $(BUILD)/containerd-shim-boxlite-v2 $(BUILD)/crictl $(GUEST)/vmlinuz $(GUEST)/initramfs.cpio $(DEBIAN_KERNEL)/initramfs.cpio $(BUILD)/libboxlite.so
lib: $(BUILD)/libboxlite.so

# Test images, built offline (see tests/images/): alpine:latest is a busybox-based stand-in,
# python:slim a Debian one (debootstrap, as root; about a minute, then cached by content,
# so the FORCE'd script returns at once when nothing changed).
ALPINE_IMAGE := $(BUILD)/images/alpine.tar
PYTHON_IMAGE := $(BUILD)/images/python.tar
TEST_IMAGES  := $(ALPINE_IMAGE) $(PYTHON_IMAGE)

$(ALPINE_IMAGE): tests/images/busybox-rootfs.sh $(wildcard tests/images/mkimage/*.go) | $(BUILD)/.setup
	rm -rf $(BUILD)/images/alpine-rootfs && mkdir -p $(BUILD)/images
	tests/images/busybox-rootfs.sh $(BUILD)/images/alpine-rootfs
	$(GO) run ./tests/images/mkimage -name alpine:latest -rootfs $(BUILD)/images/alpine-rootfs \
	  -env PATH=/usr/sbin:/usr/bin:/sbin:/bin -workdir / -cmd /bin/sh -chown /home/box=1000:1000 -o $@.tmp && mv $@.tmp $@

$(PYTHON_IMAGE): FORCE | $(BUILD)/.setup
	GO=$(GO) tests/images/python-image.sh $@

images: build $(TEST_IMAGES)
	for i in $(TEST_IMAGES); do $(BUILD)/boxlite image load $$i || exit 1; done

demo: build $(ALPINE_IMAGE)
	@$(BUILD)/boxlite image load $(ALPINE_IMAGE) >/dev/null
	@echo '$$ boxlite run --rm alpine:latest -- sh -c "uname -a; echo hello from a microVM"'
	@timeout 300 $(BUILD)/boxlite run --rm alpine:latest -- sh -c 'uname -a; echo hello from a microVM'

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# Integration tests boot real boxes (TCG here: a few seconds each), sharing them where they can.
export BOXLITE_TEST_IMAGE        := $(ALPINE_IMAGE)
export BOXLITE_TEST_PYTHON_IMAGE := $(PYTHON_IMAGE)
test: vet test-go test-c test-rust test-node test-python test-rest-sdk test-install

# tests/readme runs the README's blocks, its Node fragment with bindings/node (hence node).
test-go: build node $(TEST_IMAGES)
	BOXLITE_GUEST_KERNEL=$(GUEST)/kernel BOXLITE_STOCK_KERNEL=$(DEBIAN_KERNEL) $(GO) test -count=1 -timeout 20m ./...

test-c: build $(ALPINE_IMAGE)
	cmake -S . -B $(BUILD)/cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)/cmake
	ctest --test-dir $(BUILD)/cmake --output-on-failure

# test-rust: mk/dist-native.mk.

node: build
	cd bindings/node && BOXLITE_BUILD_DIR=$(BUILD) npm install --no-audit --no-fund

python: build
	python3 -m pip install --quiet bindings/python

# From tests/ so that the installed wheel is imported, with its own assets.
test-python: python $(TEST_IMAGES)
	python3 -m pip install --quiet pytest
	cd bindings/python/tests && env -u BOXLITE_ASSETS python3 -m pytest -q .

test-node: node $(TEST_IMAGES)
	cd bindings/node && BOXLITE_ASSETS= node --test --test-concurrency=4 test/*.test.js

# The Python and Node SimpleBox and CodeBox suites against a REST runtime:
# build/boxlite serve on loopback, its own home, a key; see the script.
test-rest-sdk: node python $(TEST_IMAGES)
	tests/rest/sdk_suites.sh

# The kill soak: SOAK_CYCLES creators SIGKILLed at random points of a box's
# creation, each checked to leave nothing behind (make test runs 5).
SOAK_CYCLES ?= 200
# bench -idle: the count of idle boxes exec is timed among.
IDLE_BOXES ?= 20
soak: build $(ALPINE_IMAGE)
	BOXLITE_SOAK_CYCLES=$(SOAK_CYCLES) $(GO) test -count=1 -timeout 60m -run 'TestKilledCreatorLeavesNothing|TestShimKilledMeansStopped|TestConcurrentExecs' -v ./tests/integration

bench: build $(TEST_IMAGES) node python
	$(GO) run ./tests/bench
	$(GO) run ./tests/bench -many 10
	$(GO) run ./tests/bench -many 20
	$(GO) run ./tests/bench -many 50
	$(GO) run ./tests/bench -many 100
	$(GO) run ./tests/bench -spin
	$(GO) run ./tests/bench -net
	$(GO) run ./tests/bench -volumes
	$(GO) run ./tests/bench -copy
	$(GO) run ./tests/bench -warm
	$(GO) run ./tests/bench -pool
	$(GO) run ./tests/bench -idle $(IDLE_BOXES)
	$(GO) run ./tests/bench -mem
	$(GO) run ./tests/bench -rest
	$(GO) run ./tests/bench -pause
	$(GO) run ./tests/bench -paused 200
	$(GO) run ./tests/bench -tunnel
	$(GO) test -run XXX -bench CreateToFirstExec -benchtime 3x ./tests/integration
	cd bindings/python && python3 bench.py
	cd bindings/node && node bench.js

FORCE:

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BUILD)

# Release artifacts and their install tests (make dist, make test-install), and others.
-include mk/*.mk
