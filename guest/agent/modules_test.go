//go:build linux

package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestModuleParams(t *testing.T) {
	got := moduleParams(`console=ttyS0 quiet virtio_mmio.device=512@0xfeb00e00:12 virtio-mmio.device=512@0xfeb00c00:11 foo.bar "opt.x=a b" panic=-1 a.b.c=1`)
	want := map[string]string{
		"virtio_mmio": "device=512@0xfeb00e00:12 device=512@0xfeb00c00:11",
		"foo":         "bar",
		"opt":         `x="a b"`,
		"a":           "b.c=1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

// TestModinfoDepends reads a real Debian module (BOXLITE_STOCK_KERNEL, as
// written by guest/fetch-kernel.sh; make test-go sets it).
func TestModinfoDepends(t *testing.T) {
	dir := os.Getenv("BOXLITE_STOCK_KERNEL")
	if dir == "" {
		t.Fatal("BOXLITE_STOCK_KERNEL is not set (make test-go sets it)")
	}
	deps, err := modinfoDepends(filepath.Join(dir, "modules", "virtio_mmio.ko"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(deps, []string{"virtio", "virtio_ring"}) {
		t.Fatalf("virtio_mmio depends on %q", deps)
	}
}

// The guest end is checked in a real box (TestFreedGuestMemoryReturnsToHost);
// here: what is written, and that a kernel without page reporting is fine.
func TestTunePageReporting(t *testing.T) {
	param := filepath.Join(t.TempDir(), "page_reporting_order")
	if err := os.WriteFile(param, []byte("9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tunePageReporting(param); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(param); string(b) != "5\n" {
		t.Errorf("wrote %q, want \"5\\n\"", b)
	}
	if err := tunePageReporting(filepath.Join(t.TempDir(), "absent")); err != nil {
		t.Errorf("without page reporting: %v", err)
	}
}
