// Package errdefs is boxlite's one error vocabulary: sentinel kinds that every
// layer wraps with %w and every edge (protocol, C codes, bindings) converts once.
package errdefs
