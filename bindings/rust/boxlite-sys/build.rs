//! Finds libboxlite.so: $BOXLITE_LIB_DIR, else an installed prefix through
//! pkg-config (`cmake --install` or `make install` writes boxlite.pc), else
//! the checkout's build/ (when the crate is used by path from the repo).
//! Its folder is this crate's `links` metadata (DEP_BOXLITE_LIB_DIR for the
//! crates that depend on it directly), for an rpath: cargo passes no link
//! argument of a dependency on to a program. The library finds its assets
//! beside itself.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=BOXLITE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if std::env::var_os("DOCS_RS").is_some() {
        return; // docs need no library
    }
    let dir = lib_dir().unwrap_or_else(|| {
        panic!(
            "boxlite-sys: libboxlite.so not found. Install boxlite (make build install, or \
             cmake --install build/cmake --prefix PREFIX with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig), \
             or set BOXLITE_LIB_DIR to the folder that holds libboxlite.so"
        )
    });
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=boxlite");
    println!("cargo:lib_dir={}", dir.display());
}

fn lib_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BOXLITE_LIB_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Ok(out) = Command::new("pkg-config").args(["--variable=libdir", "boxlite"]).output() {
        let d = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !d.is_empty() {
            return Some(PathBuf::from(d));
        }
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../build");
    if checkout.join("libboxlite.so").exists() {
        return checkout.canonicalize().ok();
    }
    None
}
