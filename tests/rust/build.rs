//! The program is the README's Rust quick start, as it is: the block marked
//! `<!-- test: rust-program -->` (see tests/internal/readme) copied into
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
    let code = snippet(&text, "rust-program");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("readme_main.rs");
    std::fs::write(out, format!("{code}\n")).unwrap();

    let dir = std::env::var("BOXLITE_LIB_DIR").unwrap_or_else(|_| root.join("build").display().to_string());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}

/// The code of the fenced block right after the line `<!-- test: NAME -->`.
fn snippet(text: &str, name: &str) -> String {
    let marker = format!("<!-- test: {name} -->\n```");
    let start = text.find(&marker).unwrap_or_else(|| panic!("README.md: no block marked <!-- test: {name} -->"));
    let body = &text[start + marker.len()..];
    let body = &body[body.find('\n').expect("README.md: a fence") + 1..];
    body[..body.find("\n```").expect("README.md: an unclosed fence") + 1].to_string()
}
