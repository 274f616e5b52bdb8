package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestCheckRootCgroup(t *testing.T) {
	for _, c := range []RootCgroup{
		{Name: "c1"}, {Name: strings.Repeat("a", MaxCgroupName)}, {Name: "0a_b.c-d"},
		{Name: "x", MemoryMax: 64 << 20, CPUQuota: 50000, CPUPeriod: 100000, CPUWeight: 10000, PidsMax: 100},
	} {
		if err := CheckRootCgroup(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []RootCgroup{
		{}, {Name: strings.Repeat("a", MaxCgroupName+1)}, {Name: ".."}, {Name: "a/b"}, {Name: "-a"}, {Name: "a b"}, {Name: "é"},
		{Name: "x", CPUQuota: 50000}, {Name: "x", CPUQuota: 50000, CPUPeriod: 2_000_000}, {Name: "x", CPUQuota: 10, CPUPeriod: 100000},
		{Name: "x", CPUWeight: 10001}, {Name: "x", PidsMax: 1 << 23}, {Name: "x", MemoryMax: 1 << 51},
	} {
		if err := CheckRootCgroup(c); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", c, err)
		}
	}
}
