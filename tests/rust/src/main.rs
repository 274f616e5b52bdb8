//! The README's Rust quick start (build.rs copies it from README.md).
include!(concat!(env!("OUT_DIR"), "/readme_main.rs"));
