# boxlite: `make demo` boots a box and runs a command in it; `make test` runs the tests.
# Every target installs what it needs (Debian packages as root, Go modules, the guest kernel).

GO      ?= go
BUILD   := $(CURDIR)/build
GUEST   := $(BUILD)/guest
# The guest kernel is Debian's cloud kernel, pinned in guest/fetch-kernel.sh.
APT_PKGS   := qemu-system-x86 busybox-static e2fsprogs cpio
# A home of our own, so demo and tests never touch ~/.boxlite.
export BOXLITE_HOME   ?= $(BUILD)/home
export BOXLITE_ASSETS := $(BUILD)

GO_SRC := $(shell find . -name '*.go' -not -path './build/*') go.mod go.sum

.PHONY: all setup build images demo test bench vet fmt clean
all: build

setup: $(BUILD)/.setup
$(BUILD)/.setup: Makefile
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	$(GO) mod download
	@mkdir -p $(BUILD) && touch $@

$(GUEST)/kernel/vmlinuz: guest/fetch-kernel.sh | $(BUILD)/.setup
	guest/fetch-kernel.sh $(GUEST)/kernel

$(BUILD)/boxlite-agent: $(GO_SRC) | $(BUILD)/.setup
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./cmd/boxlite-agent

$(GUEST)/initramfs.cpio: $(BUILD)/boxlite-agent $(GUEST)/kernel/vmlinuz guest/mkinitramfs.sh
	guest/mkinitramfs.sh $(BUILD)/boxlite-agent $(GUEST)/kernel/modules $@

$(GUEST)/vmlinuz: $(GUEST)/kernel/vmlinuz
	cp $< $@

$(BUILD)/boxlite $(BUILD)/boxlite-shim: $(GO_SRC) | $(BUILD)/.setup
	$(GO) build -o $(BUILD)/boxlite ./cmd/boxlite
	$(GO) build -o $(BUILD)/boxlite-shim ./cmd/boxlite-shim

build: $(BUILD)/boxlite $(BUILD)/boxlite-shim $(GUEST)/vmlinuz $(GUEST)/initramfs.cpio

# Test images, built offline. alpine:latest is a busybox-based stand-in.
$(BUILD)/images/alpine.tar: tests/images/busybox-rootfs.sh $(wildcard tests/images/mkimage/*.go) | $(BUILD)/.setup
	rm -rf $(BUILD)/images/alpine-rootfs && mkdir -p $(BUILD)/images
	tests/images/busybox-rootfs.sh $(BUILD)/images/alpine-rootfs
	$(GO) run ./tests/images/mkimage -name alpine:latest -rootfs $(BUILD)/images/alpine-rootfs \
	  -env PATH=/usr/sbin:/usr/bin:/sbin:/bin -workdir / -cmd /bin/sh -chown /home/box=1000:1000 -o $@.tmp && mv $@.tmp $@

images: build $(BUILD)/images/alpine.tar
	$(BUILD)/boxlite image load $(BUILD)/images/alpine.tar

demo: images
	@echo '$$ boxlite run --rm alpine:latest -- sh -c "uname -a; cat /etc/hostname; echo hello from a microVM"'
	@timeout 300 $(BUILD)/boxlite run --rm alpine:latest -- sh -c 'uname -a; echo hello from a microVM'

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# Integration tests boot real boxes (TCG here: a few seconds each), sharing them where they can.
test: build $(BUILD)/images/alpine.tar vet
	BOXLITE_TEST_IMAGE=$(BUILD)/images/alpine.tar BOXLITE_GUEST_KERNEL=$(GUEST)/kernel \
	  $(GO) test -count=1 -timeout 20m ./...

bench: build $(BUILD)/images/alpine.tar
	BOXLITE_TEST_IMAGE=$(BUILD)/images/alpine.tar $(GO) run ./tests/bench

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BUILD)
