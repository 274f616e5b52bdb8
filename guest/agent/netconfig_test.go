//go:build linux

package agent

import (
	"fmt"
	"testing"
)

func TestParseNetConfigIPv6(t *testing.T) {
	c, err := parseNetConfig("quiet boxlite.net=10.1.2.3/24,10.1.2.1,1500,v6=fd00:1::3/64,v6=2001:db8::3/64,gw6=fd00:1::1 x=y")
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr.String() != "10.1.2.3/24" || fmt.Sprint(c.Addrs6) != "[fd00:1::3/64 2001:db8::3/64]" || c.Gateway6.String() != "fd00:1::1" || c.HostAlias {
		t.Errorf("%+v", c)
	}
	c, err = parseNetConfig("boxlite.net=10.1.2.3/24,10.1.2.1,1500,mac=aa:bb:cc:00:11:22 boxlite.net1=10.9.0.5/24,none,1400,mac=AA:BB:CC:00:11:33,v6=fd09::5/64")
	if err != nil {
		t.Fatal(err)
	}
	if c.MAC != "aa:bb:cc:00:11:22" || len(c.Extra) != 1 || c.Extra[0].MAC != "aa:bb:cc:00:11:33" || c.Extra[0].Gateway.IsValid() ||
		c.Extra[0].MTU != 1400 || fmt.Sprint(c.Extra[0].Addrs6) != "[fd09::5/64]" {
		t.Errorf("with a further NIC: %+v, extra %+v", c, c.Extra)
	}
	for _, bad := range []string{
		"boxlite.net=10.1.2.3/24,none,1500",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500 boxlite.net1=10.9.0.5/24,none,1400",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500,mac=zz",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500,v6=10.0.0.1/8",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500,v6=fd00::1",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500,gw6=10.0.0.1",
		"boxlite.net=10.1.2.3/24,10.1.2.1,1500,v6=fd::1/64,v6=fd::2/64,v6=fd::3/64,v6=fd::4/64,v6=fd::5/64",
	} {
		if c, err := parseNetConfig(bad); err == nil {
			t.Errorf("%s: %+v, want an error", bad, c)
		}
	}
}
