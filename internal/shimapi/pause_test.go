package shimapi

import (
	"strings"
	"testing"
)

func TestCompatMismatch(t *testing.T) {
	base := Compat{QEMUVersion: "7.2.19", KernelSHA: "k", InitrdSHA: "i", Agent: "a1", MemoryMiB: 512, CPUs: 1,
		Devices: []string{"accel=tcg", "disk rw ro=false /d"}}
	if m := base.Mismatch(base); m != "" {
		t.Fatalf("the same compat differs: %s", m)
	}
	noAgent := base
	noAgent.Agent = "" // not known on resume: the initramfs stands for it
	if m := base.Mismatch(noAgent); m != "" {
		t.Fatalf("an unknown agent differs: %s", m)
	}
	for what, change := range map[string]func(*Compat){
		"QEMU":      func(c *Compat) { c.QEMUVersion = "8.0.0" },
		"kernel":    func(c *Compat) { c.KernelSHA = "k2" },
		"initramfs": func(c *Compat) { c.InitrdSHA = "i2" },
		"agent":     func(c *Compat) { c.Agent = "a2" },
		"memory":    func(c *Compat) { c.MemoryMiB = 1024 },
		"cpus":      func(c *Compat) { c.CPUs = 2 },
		"devices":   func(c *Compat) { c.Devices = append([]string{}, "accel=kvm", "disk rw ro=false /d") },
	} {
		now := base
		change(&now)
		if m := base.Mismatch(now); !strings.Contains(m, what) {
			t.Errorf("%s changed: mismatch %q does not name it", what, m)
		}
	}
}
