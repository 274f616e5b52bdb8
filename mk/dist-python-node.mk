# Release artifacts for Python and Node (included by the Makefile): `make dist` writes into dist/
#   boxlite_go-VERSION-py3-none-manylinux_2_31_x86_64.whl   (auditwheel repair gives the tag)
#   boxlite_go-VERSION.tar.gz                               (sdist: Python sources only)
#   boxlite-go-VERSION.tgz                                  (npm pack: prebuilt addon and assets)
# and mk/dist-native.mk the crates, the source tarball and the Go module.
# Their native parts are built against a Debian 11 root's glibc 2.31 (packaging/sysroot.sh,
# made once into build/dist/), not the host's, so that they run on older systems than this
# one: see packaging/native.sh and docs/install.md. `make test-install` installs them as users
# do (a PEP 503 index on loopback, fresh virtualenvs, a debootstrapped Debian 12).

DIST        ?= $(CURDIR)/dist
DISTBUILD   := $(BUILD)/dist
SYSROOT     := $(DISTBUILD)/sysroot-bullseye
DISTNATIVE  := $(DISTBUILD)/native
DISTVENV    := $(DISTBUILD)/venv
# manylinux_2_31: the glibc of the root the native parts link against (Debian 11, the oldest
# Debian release deb.debian.org still serves); auditwheel fails the build if any part asks more.
PYTHON_PLAT := manylinux_2_31_x86_64
PKG_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' bindings/python/pyproject.toml)

WHEEL    := $(DIST)/boxlite_go-$(PKG_VERSION)-py3-none-$(PYTHON_PLAT).whl
SDIST    := $(DIST)/boxlite_go-$(PKG_VERSION).tar.gz
NPM_TGZ  := $(DIST)/boxlite-go-$(PKG_VERSION).tgz
NATIVE_PARTS := $(addprefix $(DISTNATIVE)/,libboxlite.so boxlite-shim boxlite-net virtiofsd boxlite.node guest/vmlinuz guest/initramfs.cpio)

.PHONY: dist dist-python dist-node test-install test-install-snippets test-install-python test-install-node test-install-cleanroot
dist: dist-python dist-node dist-native
dist-python: $(WHEEL) $(SDIST)
dist-node: $(NPM_TGZ)

# Made once (packaging/sysroot.sh returns at once when it is there): rm -rf it to remake it.
$(SYSROOT)/.complete: | $(BUILD)/.setup
	packaging/sysroot.sh $(SYSROOT)

$(DISTVENV)/.complete: packaging/requirements-dist.txt
	@/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	rm -rf $(DISTVENV) && /usr/bin/python3 -m venv $(DISTVENV)
	$(DISTVENV)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

$(DISTNATIVE)/libboxlite.so: $(GO_SRC) include/boxlite.h capi/capi.h packaging/native.sh $(SYSROOT)/.complete
	packaging/native.sh $(SYSROOT) $(BUILD) $(DISTNATIVE) lib
$(DISTNATIVE)/boxlite-shim $(DISTNATIVE)/boxlite-net &: $(GO_SRC) packaging/native.sh
	packaging/native.sh $(SYSROOT) $(BUILD) $(DISTNATIVE) go
$(DISTNATIVE)/virtiofsd: $(SYSROOT)/.complete
	packaging/native.sh $(SYSROOT) $(BUILD) $(DISTNATIVE) virtiofsd
$(DISTNATIVE)/boxlite.node: $(DISTNATIVE)/libboxlite.so $(wildcard bindings/node/src/*.c bindings/node/src/*.h bindings/node/src/napi/*.h)
	packaging/native.sh $(SYSROOT) $(BUILD) $(DISTNATIVE) addon
$(DISTNATIVE)/guest/vmlinuz $(DISTNATIVE)/guest/initramfs.cpio &: $(GUEST)/vmlinuz $(GUEST)/initramfs.cpio
	packaging/native.sh $(SYSROOT) $(BUILD) $(DISTNATIVE) guest

$(WHEEL) $(SDIST) &: $(NATIVE_PARTS) $(DISTVENV)/.complete $(wildcard bindings/python/boxlite/*.py) bindings/python/setup.py bindings/python/pyproject.toml bindings/python/README.md packaging/python-dist.sh
	packaging/python-dist.sh $(DISTVENV) $(DISTNATIVE) $(DIST) $(PYTHON_PLAT) $(SYSROOT)/usr/lib/x86_64-linux-gnu

$(NPM_TGZ): $(NATIVE_PARTS) $(wildcard bindings/node/lib/* bindings/node/scripts/* bindings/node/src/*.c) bindings/node/package.json bindings/node/README.md packaging/node-dist.sh
	packaging/node-dist.sh $(DISTNATIVE) $(DISTBUILD)/node-package $(DIST)

# Install tests: as users install, from the artifacts (boot boxes: they need build/ and the images).
INSTALL_ENV := BOXLITE_DIST=$(DIST) BOXLITE_DISTBUILD=$(DISTBUILD) DISTVENV=$(DISTVENV) PYTHON_IMAGE=$(PYTHON_IMAGE) ALPINE_IMAGE=$(ALPINE_IMAGE)
test-install: test-install-snippets test-install-python test-install-node test-install-cleanroot
# Every README snippet marked `<!-- test: NAME -->` is run by its test (these below among them).
test-install-snippets:
	$(GO) test -count=1 -run TestEveryBlockIsRun ./tests/readme
test-install-python: dist-python $(TEST_IMAGES) $(DISTVENV)/.complete
	$(INSTALL_ENV) tests/install/python.sh
test-install-node: dist-node $(TEST_IMAGES)
	$(INSTALL_ENV) tests/install/node.sh
test-install-cleanroot: dist-python dist-node $(TEST_IMAGES) $(DISTVENV)/.complete
	$(INSTALL_ENV) tests/install/cleanroot.sh
