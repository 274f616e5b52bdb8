// Package netpolicy is a box's egress rules (allow_net): which host names,
// addresses and networks, on which ports, a box may reach. It parses and
// matches rules only; the box's network stack (package netstack) enforces
// them, and the runtime validates them when a box is created.
package netpolicy
