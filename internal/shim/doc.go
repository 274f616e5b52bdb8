// Package shim is the per-box supervisor: it owns the VMM process and the agent
// channel, and multiplexes host clients onto that channel.
package shim
