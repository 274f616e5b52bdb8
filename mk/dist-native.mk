# The native parts of a release and of an install (included by the Makefile):
#   make install [PREFIX=/usr/local]  the C library (libboxlite.so.0), header, boxlite.pc
#                                     and the assets in PREFIX/lib/boxlite, where C, Rust
#                                     and Go programs find them with no variable set
#   make dist-native                  into dist/: the Rust crates (cargo package), the
#                                     source tarball, the Go module as a proxy directory
#   make test-rust                    the crates' tests and the README's Rust program

PREFIX      ?= /usr/local
DIST        ?= $(CURDIR)/dist
CMAKE_BUILD := $(BUILD)/cmake
VERSION     := $(shell sed -n 's/^const Version = "\(.*\)"/\1/p' version.go)

.PHONY: install dist-native test-rust

$(CMAKE_BUILD)/CMakeCache.txt: CMakeLists.txt boxlite.pc.in | $(BUILD)/.setup
	cmake -S . -B $(CMAKE_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

install: build $(CMAKE_BUILD)/CMakeCache.txt
	cmake --build $(CMAKE_BUILD) --target boxlite_go
	cmake --install $(CMAKE_BUILD) --prefix $(PREFIX)
	@if [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

# The crates are verified (built) by cargo package against build/libboxlite.so.
dist-native: build
	@command -v cargo >/dev/null || { echo "dist-native: cargo is missing (rustup: https://rustup.rs)"; exit 1; }
	mkdir -p $(DIST)
	cd bindings/rust && BOXLITE_LIB_DIR=$(BUILD) CARGO_TARGET_DIR=$(BUILD)/rust-dist cargo package --workspace --locked --quiet
	cp $(BUILD)/rust-dist/package/boxlite-$(VERSION).crate $(BUILD)/rust-dist/package/boxlite-sys-$(VERSION).crate $(DIST)/
	git archive --format=tar.gz --prefix=boxlite-$(VERSION)/ -o $(DIST)/boxlite-$(VERSION).tar.gz HEAD
	rm -rf $(DIST)/goproxy && $(GO) run ./internal/gomodproxy -o $(DIST)/goproxy
	@ls -l $(DIST)

# The crates' own test boots a box (with a volume); tests/rust is a user's
# program depending on the crate by path: the README's Rust quick start.
test-rust: build $(ALPINE_IMAGE)
	@command -v cargo >/dev/null || { echo "test-rust: cargo is missing (rustup: https://rustup.rs)"; exit 1; }
	cd bindings/rust && BOXLITE_LIB_DIR=$(BUILD) CARGO_TARGET_DIR=$(BUILD)/rust cargo test --locked -q
	cd tests/rust && BOXLITE_LIB_DIR=$(BUILD) CARGO_TARGET_DIR=$(BUILD)/rust cargo test -q
