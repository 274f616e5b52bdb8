package convert

import (
	"errors"
	"testing"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// TestNetwork: BoxLite's split form and the flat one give the same spec;
// mixing them, an outbound without a mode, a bad inbound mode are invalid;
// an inbound allow-list is unsupported, as BoxLite's.
func TestNetwork(t *testing.T) {
	split, err := Network(abi.Network{Outbound: &abi.NetworkDirection{Mode: "enabled", AllowNet: []string{"pypi.org"}},
		Inbound: &abi.NetworkDirection{Mode: "disabled"}})
	if err != nil || split.Mode != "enabled" || len(split.AllowNet) != 1 || split.Inbound != "disabled" {
		t.Fatalf("split: %+v %v", split, err)
	}
	flat, err := Network(abi.Network{Mode: "enabled", AllowNet: []string{"pypi.org"}})
	if err != nil || flat.Mode != split.Mode || flat.AllowNet[0] != split.AllowNet[0] || flat.InboundMode() != boxlite.NetworkEnabled {
		t.Fatalf("flat: %+v %v", flat, err)
	}
	for _, bad := range []abi.Network{
		{Mode: "enabled", Outbound: &abi.NetworkDirection{Mode: "enabled"}},
		{AllowNet: []string{"x"}, Inbound: &abi.NetworkDirection{Mode: "enabled"}},
		{Outbound: &abi.NetworkDirection{}},
		{Inbound: &abi.NetworkDirection{Mode: "public"}},
	} {
		if _, err := Network(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := Network(abi.Network{Inbound: &abi.NetworkDirection{Mode: "enabled", AllowNet: []string{"1.2.3.4"}}}); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("inbound allow-list: %v", err)
	}
}
