// Command capi is libboxlite.so: the C ABI of include/boxlite.h over package
// the Go API (package boxlite). Build it with go build -buildmode=c-shared.
//
// Handles are ids in a table, never pointers: a stale, freed or mistyped
// handle is an error, not a crash (cgo.Handle would panic on a stale one).
// Every export recovers panics into BOXLITE_ERR_INTERNAL.
package main

func main() {}
