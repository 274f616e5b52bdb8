// Package hostaddr finds the host's own addresses for tests that reach the
// host from a box or a network stack.
package hostaddr

import (
	"net"
	"net/netip"
	"testing"
)

// OwnIPv4 is one of this host's non-loopback IPv4 addresses; the test fails
// when it has none.
func OwnIPv4(t testing.TB) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr()
		}
	}
	t.Fatal("this host has no non-loopback IPv4 address to test with")
	return netip.Addr{}
}
