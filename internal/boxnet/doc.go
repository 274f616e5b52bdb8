// Package boxnet is the host's side of a box's network that the shim needs
// without the network stack itself (package netstack, which runs in a
// process of its own): the box's addresses and the word that tells the
// agent, the published ports bound on the host, the host-wide registry of
// the ports boxes publish, and the stack's questions about it. It stays
// free of gVisor and gvisor-tap-vsock, whose packages cost every process
// that links them memory at init.
package boxnet
