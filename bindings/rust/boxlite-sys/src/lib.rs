//! Raw bindings to libboxlite, the C ABI of boxlite (`include/boxlite.h`):
//! every constant, type and function of the header, as the header declares
//! them. Use the `boxlite` crate for a safe API.
//!
//! The declarations are generated from the header by the repository's
//! `internal/abigen` (`go generate ./errdefs`), not by bindgen at build time:
//! building needs no libclang, and a test fails when they fall behind the
//! header. The build script links `libboxlite.so` (see build.rs: an installed
//! prefix through pkg-config, or `BOXLITE_LIB_DIR`).
#![no_std]
#![allow(non_camel_case_types, non_upper_case_globals, clippy::missing_safety_doc)]

pub use core::ffi::{c_char, c_int, c_void};

include!("bindings.rs");
