package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// Identity.Check refuses a boot id that is not a UUID in the kernel's form
// and a machine id that is not 32 lowercase hex digits; both are optional.
func TestIdentityCheckMachine(t *testing.T) {
	base := Identity{Seed: make([]byte, MinSeed), Hostname: "box"}
	ok := []Identity{base,
		{Seed: base.Seed, Hostname: "box", BootID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", MachineID: strings.Repeat("ab", 16)}}
	for _, id := range ok {
		if err := id.Check(); err != nil {
			t.Errorf("%+v: %v", id, err)
		}
	}
	bad := []Identity{
		{Seed: base.Seed, Hostname: "box", BootID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f"},
		{Seed: base.Seed, Hostname: "box", BootID: "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9"},
		{Seed: base.Seed, Hostname: "box", BootID: "0f1e2d3c04b5a-4978-8695-a4b3c2d1e0f9"},
		{Seed: base.Seed, Hostname: "box", BootID: "../../../../etc/passwd-xxxxxxxxxxxxx"},
		{Seed: base.Seed, Hostname: "box", MachineID: strings.Repeat("ab", 15)},
		{Seed: base.Seed, Hostname: "box", MachineID: strings.Repeat("zz", 16)},
		{Seed: base.Seed, Hostname: "box", MachineID: strings.Repeat("ab", 16) + "\n"},
	}
	for _, id := range bad {
		if err := id.Check(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q %q: %v, want ErrInvalidArgument", id.BootID, id.MachineID, err)
		}
	}
}
