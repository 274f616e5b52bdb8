package boxnet

import (
	"fmt"
	"net/netip"

	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The box network: the same addresses in every box (each box has a stack of
// its own, so boxes share no link). BoxLite's subnet and names.
var (
	Subnet    = netip.MustParsePrefix("192.168.127.0/24")
	GatewayIP = netip.MustParseAddr("192.168.127.1") // the stack: DNS, NAT
	GuestIP   = netip.MustParseAddr("192.168.127.2")
	// HostIP answers for the host: connections to it reach the host's
	// 127.0.0.1 (netpolicy.HostAlias names it in the box).
	HostIP = netpolicy.HostAliasAddr
)

const (
	GatewayMAC = "5a:94:ef:e4:0c:dd"
	GuestMAC   = "5a:94:ef:e4:0c:ee"
	// MTU of the box's link. The frames cross a local socket, so a large
	// MTU only saves per-packet work (measured: see docs/NOTES.md).
	MTU = 4000
)

// GuestConfig is what the box's agent needs to bring its NIC up, as one
// kernel command line word: boxlite.net=IP/BITS,GATEWAY,MTU[,hostalias].
// hostalias asks for /etc/hosts to name HostIP (only when the box's policy
// lets it reach the host).
func GuestConfig(hostAlias bool) string {
	s := protocol.NetWord(fmt.Sprintf("%s/%d,%s,%d", GuestIP, Subnet.Bits(), GatewayIP, MTU))
	if hostAlias {
		s += ",hostalias"
	}
	return s
}
