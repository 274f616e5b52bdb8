// Links libboxlite.so from BOXLITE_LIB_DIR (default: the repo's build/).
fn main() {
    let dir = std::env::var("BOXLITE_LIB_DIR").unwrap_or_else(|_| {
        format!("{}/../../build", env!("CARGO_MANIFEST_DIR"))
    });
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=boxlite");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    println!("cargo:rerun-if-env-changed=BOXLITE_LIB_DIR");
}
