// Package core is the boxlite runtime: the home directory, the box registry,
// box lifecycles and executions, speaking to each box's shim over a Unix socket.
package core
