// Command abigen writes every edge's copy of the contract from its one
// source: the error kinds and their codes (errdefs.Kinds), the defaults and
// limits (abi.Constants), and the wire structs' documentation (the doc and
// enum tags of package abi) as the header's option and info comment blocks
// and index.d.ts's option and info types: `go generate ./errdefs`. With
// -check it writes nothing and fails on a stale file.
package main
