// Package agent is boxlite's guest agent: PID 1 of the box VM, which mounts the
// image layers and serves the host's exec requests over the protocol channel,
// running every box process in a container-like sandbox walled off from itself
// (sandbox.go).
package agent
