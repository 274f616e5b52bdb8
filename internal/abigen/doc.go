// Command abigen writes every edge's copy of the contract (error kinds and
// their codes) from its one source, errdefs.Kinds: `go generate ./errdefs`.
// With -check it writes nothing and fails on a stale file.
package main
