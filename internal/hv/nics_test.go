package hv

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// A pod's further interfaces are further virtio-net devices on their taps.
func TestExtraNICArgs(t *testing.T) {
	tap, err := os.Open(os.DevNull) // a stand-in: only its presence counts here
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	cfg := Config{Kernel: "/k/vmlinuz", MemoryMiB: 512, NIC: &NIC{MAC: "5a:94:ef:e4:0c:ee", Tap: tap},
		ExtraNICs: []NIC{{MAC: "aa:bb:cc:00:11:33", Tap: tap}, {MAC: "aa:bb:cc:00:11:44", Tap: tap}}}
	cfg.extraNetFDs = []int{11, 12}
	args := strings.Join(buildArgs(cfg, 0, 3, -1, -1, 9, nil), " ")
	for _, want := range []string{
		"-netdev tap,id=net0,fd=9 -device virtio-net-device,netdev=net0,mac=5a:94:ef:e4:0c:ee",
		"-netdev tap,id=net1,fd=11 -device virtio-net-device,netdev=net1,mac=aa:bb:cc:00:11:33",
		"-netdev tap,id=net2,fd=12 -device virtio-net-device,netdev=net2,mac=aa:bb:cc:00:11:44",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
	for _, bad := range []Config{
		{Kernel: "/k", MemoryMiB: 512, ExtraNICs: []NIC{{MAC: "aa:bb:cc:00:11:33", Tap: tap}}},
		{Kernel: "/k", MemoryMiB: 512, NIC: &NIC{MAC: "5a:94:ef:e4:0c:ee"}, ExtraNICs: []NIC{{MAC: "aa:bb:cc:00:11:33"}}},
		{Kernel: "/k", MemoryMiB: 512, NIC: &NIC{MAC: "5a:94:ef:e4:0c:ee"}, ExtraNICs: []NIC{{MAC: "nope", Tap: tap}}},
		{Kernel: "/k", MemoryMiB: 512, NIC: &NIC{MAC: "5a:94:ef:e4:0c:ee"}, ExtraNICs: make([]NIC, MaxExtraNICs+1)},
	} {
		if _, _, _, err := prepare(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", bad.ExtraNICs, err)
		}
	}
}
