package boxlite

// Version is boxlite's version: the Go module's, the C library's
// (BOXLITE_VERSION_STRING in include/boxlite.h, the CMake project's) and
// the Rust crates'; TestVersionsAgree checks they are the same.
const Version = "0.1.0"
