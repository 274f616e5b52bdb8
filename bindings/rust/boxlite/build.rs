//! The tests of this crate run with an rpath to the
//! libboxlite.so boxlite-sys linked (its `links` metadata). A program of
//! yours needs the library in the loader's path (an install in /usr/local
//! after ldconfig, `make install` runs it), an rpath of its own (its build.rs:
//! `cargo:rustc-link-arg=-Wl,-rpath,DIR`), or LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_BOXLITE_LIB_DIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
    }
}
