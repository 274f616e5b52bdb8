package netpolicy

import "net/netip"

// specialNets are the address ranges that are not the public Internet:
// private networks (RFC 1918, unique local IPv6), carrier-grade NAT,
// loopback, link-local, "this network", documentation, benchmarking,
// IETF protocol assignments, multicast, reserved space and the IPv6
// prefixes that embed or tunnel to IPv4 addresses (NAT64, 6to4, Teredo).
var specialNets = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// Special reports whether a is in a private or special-purpose range
// (specialNets): an address on the host's side of the Internet, or none.
func Special(a netip.Addr) bool {
	for _, p := range specialNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AllowAnswer reports whether a DNS answer of addr for an allowed name may
// reach the box (and be learned, see Learn). An address in a private or
// special range (Special), or one of the host's own (hostOwn: the caller
// knows the host's interfaces), passes only when a rule names it by
// address or network: a listed name must not lead the box to the host or
// its networks by pointing its records there (DNS rebinding). With no
// policy every answer passes: an open network reaches what the host can.
func (p *Policy) AllowAnswer(addr netip.Addr, hostOwn bool) bool {
	if p == nil {
		return true
	}
	addr = addr.Unmap()
	if !hostOwn && !Special(addr) {
		return true
	}
	for _, r := range p.rules {
		if !r.Prefix.IsValid() {
			continue
		}
		if addr == HostAliasAddr {
			// As in AllowAddr: the alias only by its own address.
			if r.Prefix == netip.PrefixFrom(HostAliasAddr, 32) {
				return true
			}
			continue
		}
		if r.Prefix.Contains(addr) {
			return true
		}
	}
	return false
}
