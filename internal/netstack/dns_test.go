package netstack

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/boxlite/boxlite/internal/hostaddr"
	"github.com/boxlite/boxlite/internal/netpolicy"
)

func answers(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// TestDNSRefusesPrivateAnswers: with allow_net, an allowed name whose
// records point at private or special ranges or at the host's own
// addresses answers without them (and the policy does not learn them),
// unless a rule names the address or network; without allow_net the
// answers pass as the host's resolver gave them.
func TestDNSRefusesPrivateAnswers(t *testing.T) {
	host := hostaddr.OwnIPv4(t)
	records := map[string][]string{
		"private.test":  {"10.1.2.3"},
		"mixed.test":    {"10.1.2.4", "93.184.216.34", "100.64.0.9", "172.16.5.5", "192.168.0.1", "169.254.169.254", "127.0.0.1"},
		"hostown.test":  {host.String()},
		"explicit.test": {"10.9.9.9"},
	}
	resolve := func(_ context.Context, name string) ([]netip.Addr, error) {
		var ips []netip.Addr
		for _, s := range records[name] {
			ips = append(ips, netip.MustParseAddr(s))
		}
		return ips, nil
	}
	pol, err := netpolicy.Parse([]string{"private.test", "mixed.test", "hostown.test", "explicit.test", "10.9.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	g, n := guest(t, Config{Policy: pol, Lookup: resolve})
	for name, want := range map[string][]string{
		"private.test": nil, "mixed.test": {"93.184.216.34"}, "hostown.test": nil, "explicit.test": {"10.9.9.9"},
	} {
		r := lookup(t, g, name)
		if r.Rcode != dns.RcodeSuccess || !slices.Equal(answers(r), want) {
			t.Errorf("%s: rcode %s, answers %v; want NOERROR and %v", name, dns.RcodeToString[r.Rcode], answers(r), want)
		}
	}
	for _, a := range []string{"10.1.2.3", "10.1.2.4", "100.64.0.9", "172.16.5.5", "192.168.0.1", host.String()} {
		if pol.AllowAddr(netip.MustParseAddr(a), 80) {
			t.Errorf("the policy learned %s from a refused answer", a)
		}
	}
	if !pol.AllowAddr(netip.MustParseAddr("93.184.216.34"), 80) {
		t.Error("the public answer was not learned")
	}
	if st := n.Stats(); st.Blocked != 8 {
		t.Errorf("blocked %d, want the 8 records dropped", st.Blocked)
	}

	open, _ := guest(t, Config{Lookup: resolve})
	if got := answers(lookup(t, open, "mixed.test")); !slices.Equal(got, records["mixed.test"]) {
		t.Errorf("no allow_net: answers %v, want all of %v", got, records["mixed.test"])
	}
}
