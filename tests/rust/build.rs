//! The program is the README's Rust quick start, as it is: taken from the
//! README's "## From C, C++ or Rust" section (its ```rust block) into
//! OUT_DIR, so that the test runs what users copy. As a program of a user,
//! it is linked with an rpath to libboxlite.so: BOXLITE_LIB_DIR, else the
//! checkout's build/.
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = root.join("README.md");
    println!("cargo:rerun-if-changed={}", readme.display());
    println!("cargo:rerun-if-env-changed=BOXLITE_LIB_DIR");
    let text = std::fs::read_to_string(&readme).expect("README.md");
    let section = text
        .split("\n## From C, C++ or Rust\n")
        .nth(1)
        .expect("README.md: no \"## From C, C++ or Rust\"");
    let section = section.split("\n## ").next().unwrap();
    let code = section
        .split("\n```rust\n")
        .nth(1)
        .expect("README.md: no ```rust block in \"## From C, C++ or Rust\"");
    let code = code.split("\n```").next().unwrap();
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("readme_main.rs");
    std::fs::write(out, format!("{code}\n")).unwrap();

    let dir = std::env::var("BOXLITE_LIB_DIR").unwrap_or_else(|_| root.join("build").display().to_string());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
