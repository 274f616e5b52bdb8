// Package kvmhost reads what a host offers for hardware virtualization: the
// CPU's VMX/SVM flags (/proc/cpuinfo) and whether /dev/kvm opens for this
// user. The shim decides the accelerator from it (internal/hv); the runtime
// warns with it when a user could have KVM but may not open it.
package kvmhost

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

const (
	// CPUInfo and DevKVM are where the host says it.
	CPUInfo = "/proc/cpuinfo"
	DevKVM  = "/dev/kvm"
	// GroupFix is what gives a user /dev/kvm (root:kvm 0660 on Debian).
	GroupFix = "add the user to the kvm group: sudo usermod -aG kvm $USER, then log in again"
)

// CPUFlags returns the flags of the first processor in /proc/cpuinfo text.
func CPUFlags(cpuinfo string) map[string]bool {
	flags := map[string]bool{}
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, f := range strings.Fields(v) {
			flags[f] = true
		}
		break
	}
	return flags
}

// HardwareVirt is "VMX" or "SVM" when cpuinfo's CPU has it, else "".
func HardwareVirt(cpuinfo string) string {
	switch flags := CPUFlags(cpuinfo); {
	case flags["vmx"]:
		return "VMX"
	case flags["svm"]:
		return "SVM"
	}
	return ""
}

// OpenKVM opens path (DevKVM) read-write, as QEMU does, and closes it.
func OpenKVM(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// Denied is the warning for a host whose CPU has VMX or SVM and whose
// kvm device (kvmPath) exists but does not open for this user: boxes then
// run under TCG, about 20 times slower. "" for any other host.
func Denied(cpuinfo, kvmPath string) string {
	hw := HardwareVirt(cpuinfo)
	if hw == "" {
		return ""
	}
	err := OpenKVM(kvmPath)
	if err == nil || !errors.Is(err, os.ErrPermission) {
		return ""
	}
	return fmt.Sprintf("the CPU has %s but this user may not open %s (%v): boxes run under TCG emulation, "+
		"about 20 times slower; %s (BOXLITE_ACCEL=tcg accepts TCG and silences this, BOXLITE_ACCEL=kvm refuses it)",
		hw, kvmPath, errors.Unwrap(err), GroupFix)
}
