// Package abi is the contract of boxlite's edges, defined once: the JSON the
// C ABI (and later the server) takes and returns, with units in every field
// name; one duration type and its one conversion; the defaults and limits
// core applies. It imports nothing of boxlite but errdefs, so the library,
// the SDK generators and any edge can share it; package edge converts these
// structs to core's types and back.
package abi
