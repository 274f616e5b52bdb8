package boxlite

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CPU with VMX and a kvm device this user may not open: one warning line
// that names the kvm group; with the device openable, or a CPU without
// VMX/SVM (software KVM, such as kvm_pvm), none. The device that does not
// open is a read-only sysfs file, which refuses O_RDWR with EACCES even to
// root (the tests may run as root, for whom a mode-0 file would open).
func TestKVMWarning(t *testing.T) {
	dir := t.TempDir()
	vmx := filepath.Join(dir, "cpuinfo-vmx")
	none := filepath.Join(dir, "cpuinfo-none")
	openable := filepath.Join(dir, "kvm")
	for p, s := range map[string]string{vmx: "processor\t: 0\nflags\t\t: fpu vmx sse2\n", none: "flags\t\t: fpu sse2 hypervisor\n", openable: ""} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	denied := "/sys/devices/system/cpu/online"
	if f, err := os.OpenFile(denied, os.O_RDWR, 0); err == nil || !os.IsPermission(err) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("%s should refuse O_RDWR with a permission error on Linux: %v", denied, err)
	}

	var w bytes.Buffer
	if !writeKVMWarning(&w, vmx, denied) {
		t.Fatal("no warning for a CPU with VMX and a kvm device that does not open")
	}
	out := w.String()
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "boxlite: warning: the CPU has VMX but this user may not open "+denied) ||
		!strings.Contains(out, "usermod -aG kvm") || !strings.Contains(out, "20 times slower") || !strings.Contains(out, "BOXLITE_ACCEL=tcg") {
		t.Fatalf("warning: %q", out)
	}
	for _, c := range []struct{ cpuinfo, kvm string }{
		{vmx, openable},                          // KVM works: nothing to say
		{none, denied},                           // no hardware virtualization: TCG is all there is
		{vmx, filepath.Join(dir, "no-such-kvm")}, // no device: not a permission the user can fix
	} {
		w.Reset()
		if writeKVMWarning(&w, c.cpuinfo, c.kvm) || w.Len() != 0 {
			t.Errorf("%s, %s: warned %q", c.cpuinfo, c.kvm, w.String())
		}
	}
}
