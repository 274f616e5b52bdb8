// Package netstack is a box's user-mode network: a gVisor TCP/IP stack (by
// way of gvisor-tap-vsock's virtual switch and gateway) that the box's VMM
// reaches over a socket of messages (SOCK_SEQPACKET), NATing the box's connections through host
// sockets, answering its DNS, enforcing its allow_net policy and publishing
// its ports on the host. It runs inside the box's shim: no root, no tap
// device, no host firewall rules, and it lives as long as the box.
package netstack
