// Package tap is gvisor-tap-vsock's pkg/tap (v0.8.9, Apache License 2.0,
// Copyright The gvisor-tap-vsock Authors): the link endpoint that puts the
// box's frames into the gVisor stack and the switch that carries them to
// and from the VM's socket, without its debug dump of frames.
//
// That dump linked github.com/google/gopacket/layers, whose init fills
// lookup tables (two of 65536 entries, four of 256) in the binary's bss:
// 6.4 MiB of memory in every box's network stack process for a log that is
// never on (docs/NOTES.md, "Memory per box"). The debug flags stay, and do
// nothing.
package tap
