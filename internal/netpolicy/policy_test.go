package netpolicy

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestParseRejects(t *testing.T) {
	for _, e := range []string{"", " ", "http://x.com", "a..b", "x.com:0", "x.com:70000", "x.com:", "::1", "[::1]:80", "2001:db8::/32", "-bad_ chars", "1.2.3.4/33"} {
		if _, err := Parse([]string{e}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Parse(%q) = %v, want invalid argument", e, err)
		}
	}
	if p, err := Parse(nil); p != nil || err != nil {
		t.Errorf("Parse(nil) = %v, %v; want no policy", p, err)
	}
}

func TestNamesAndAddresses(t *testing.T) {
	p, err := Parse([]string{"example.com", "*.pkg.dev", "api.x.io:443", "10.0.0.0/8", "192.0.2.7:53"})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{
		"example.com": true, "EXAMPLE.com.": true, "www.example.com": false,
		"a.pkg.dev": true, "a.b.pkg.dev": true, "pkg.dev": false,
		"api.x.io": true, "other.io": false, HostAlias: false,
	}
	for n, want := range names {
		if got := p.AllowName(n); got != want {
			t.Errorf("AllowName(%q) = %v, want %v", n, got, want)
		}
	}
	addr := netip.MustParseAddr
	for _, c := range []struct {
		a    string
		port uint16
		want bool
	}{
		{"10.1.2.3", 80, true}, {"11.0.0.1", 80, false},
		{"192.0.2.7", 53, true}, {"192.0.2.7", 80, false},
		{"203.0.113.5", 443, false}, // not learned yet
		{HostAliasAddr.String(), 80, false},
	} {
		if got := p.AllowAddr(addr(c.a), c.port); got != c.want {
			t.Errorf("AllowAddr(%s:%d) = %v, want %v", c.a, c.port, got, c.want)
		}
	}
	p.Learn("api.x.io", addr("203.0.113.5"))
	p.Learn("evil.io", addr("203.0.113.6")) // not allowed: not learned
	if !p.AllowAddr(addr("203.0.113.5"), 443) || p.AllowAddr(addr("203.0.113.5"), 80) {
		t.Error("a learned address must be allowed on its rule's port only")
	}
	if p.AllowAddr(addr("203.0.113.6"), 443) {
		t.Error("an answer for a name not allowed must not be learned")
	}
}

func TestHostAlias(t *testing.T) {
	wide, _ := Parse([]string{"192.168.0.0/16", "*.boxlite.internal"})
	if wide.AllowName(HostAlias) || wide.AllowAddr(HostAliasAddr, 80) {
		t.Error("the host alias must be reachable only when a rule names it")
	}
	for _, rule := range []string{HostAlias, HostAliasAddr.String()} {
		p, _ := Parse([]string{rule})
		if !p.AllowName(HostAlias) || !p.AllowAddr(HostAliasAddr, 8080) {
			t.Errorf("rule %q must allow the host alias", rule)
		}
	}
	port, _ := Parse([]string{HostAlias + ":8080"})
	if !port.AllowAddr(HostAliasAddr, 8080) || port.AllowAddr(HostAliasAddr, 22) {
		t.Error("a host alias rule with a port must allow that port only")
	}
}

func TestLearnedIsBounded(t *testing.T) {
	p, _ := Parse([]string{"*.many.test"})
	for i := 0; i < maxLearned+10; i++ {
		p.Learn("a.many.test", netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if len(p.learned.ports) != maxLearned || len(p.learned.order) != maxLearned {
		t.Errorf("learned %d addresses, want at most %d", len(p.learned.ports), maxLearned)
	}
	// The oldest went, the newest stayed.
	last := maxLearned + 9
	if p.AllowAddr(netip.AddrFrom4([4]byte{10, 0, 0, 0}), 443) || !p.AllowAddr(netip.AddrFrom4([4]byte{10, byte(last >> 16), byte(last >> 8), byte(last)}), 443) {
		t.Error("the table did not keep the newest addresses")
	}
}

func TestAllowAnswer(t *testing.T) {
	p, err := Parse([]string{"example.com", "intra.example.com", "10.9.0.0/16:443", "192.0.2.7", HostAlias})
	if err != nil {
		t.Fatal(err)
	}
	public := netip.MustParseAddr("93.184.216.34")
	for _, c := range []struct {
		addr    string
		hostOwn bool
		want    bool
	}{
		{"93.184.216.34", false, true},    // public
		{"93.184.216.34", true, false},    // public, but the host's own
		{"10.1.2.3", false, false},        // RFC 1918
		{"10.9.1.1", false, true},         // ... inside a CIDR rule (whatever its port)
		{"172.20.0.1", false, false},      // RFC 1918
		{"192.168.1.1", false, false},     // RFC 1918
		{"192.168.127.254", false, false}, // the host alias, named only by name here
		{"100.64.0.1", false, false},      // carrier-grade NAT
		{"127.0.0.1", false, false},       // loopback
		{"169.254.169.254", false, false}, // link-local metadata
		{"0.0.0.0", false, false},
		{"192.0.2.7", true, true},   // the host's own, allowed by address
		{"192.0.2.8", false, false}, // documentation range
		{"255.255.255.255", false, false},
		{"224.0.0.1", false, false},
		{"::ffff:10.0.0.1", false, false}, // mapped
		{"fd00::1", false, false},         // unique local
		{"fe80::1", false, false},
		{"2606:4700::1", false, true},
	} {
		if got := p.AllowAnswer(netip.MustParseAddr(c.addr), c.hostOwn); got != c.want {
			t.Errorf("AllowAnswer(%s, host %v) = %v, want %v", c.addr, c.hostOwn, got, c.want)
		}
	}
	alias, _ := Parse([]string{"x.example", HostAliasAddr.String()})
	if !alias.AllowAnswer(HostAliasAddr, false) {
		t.Error("the host alias's address listed as such: refused")
	}
	wide, _ := Parse([]string{"x.example", "192.168.0.0/16"})
	if wide.AllowAnswer(HostAliasAddr, false) || !wide.AllowAnswer(netip.MustParseAddr("192.168.1.1"), false) {
		t.Error("a wider CIDR: the alias must stay refused, the rest of the CIDR allowed")
	}
	var open *Policy
	if !open.AllowAnswer(netip.MustParseAddr("10.1.2.3"), true) || !open.AllowAnswer(public, true) {
		t.Error("no policy: every answer passes")
	}
}
