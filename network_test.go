package boxlite

import (
	"errors"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// A network namespace's box: the namespace's interface is its network,
// so the user-mode network's settings are refused with it.
func TestNetworkNamespaceOptions(t *testing.T) {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, format, args...)
	}
	ok := BoxConfig{Network: NetworkSpec{NetNS: "/var/run/netns/cni-1"}}
	if err := ok.validateNetwork(bad); err != nil || ok.Network.Mode != NetworkEnabled {
		t.Fatalf("%v %+v", err, ok.Network)
	}
	if n := ok.shimNetwork(); n == nil || n.NetNS != "/var/run/netns/cni-1" || len(n.AllowNet) != 0 {
		t.Errorf("shim network %+v", n)
	}
	for _, c := range []BoxConfig{
		{Network: NetworkSpec{NetNS: "relative/ns"}},
		{Network: NetworkSpec{NetNS: "/var/run/netns/../x"}},
		{Network: NetworkSpec{NetNS: "/var/run/netns/cni-1", Mode: NetworkDisabled}},
		{Network: NetworkSpec{NetNS: "/var/run/netns/cni-1", AllowNet: []string{"example.com"}}},
		{Network: NetworkSpec{NetNS: "/var/run/netns/cni-1"}, Ports: []Port{{GuestPort: 80, Protocol: "tcp", HostIP: "127.0.0.1"}}},
	} {
		if err := c.validateNetwork(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want invalid argument", c.Network, err)
		}
	}
}
