package boxlite

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/boxlite/boxlite/internal/kvmhost"
)

// kvmWarned makes the KVM warning once per process.
var kvmWarned sync.Once

// warnKVM writes on stderr, once per process, before a box boots, why it
// will run about 20 times slower when the fix is the user's: the CPU has
// VMX/SVM and /dev/kvm exists, but this user may not open it (not in the
// kvm group). Box info says TCG and why as well; BOXLITE_ACCEL=tcg
// (accepting TCG) silences it, and BOXLITE_ACCEL=kvm or WithRequireKVM makes
// the start fail with that reason instead.
func (r *Runtime) warnKVM() {
	if r.requireKVM || strings.TrimSpace(os.Getenv("BOXLITE_ACCEL")) != "" {
		return
	}
	kvmWarned.Do(func() { writeKVMWarning(os.Stderr, kvmhost.CPUInfo, kvmhost.DevKVM) })
}

// writeKVMWarning writes the warning to w when the host at these paths
// calls for it, and reports whether it did.
func writeKVMWarning(w io.Writer, cpuinfoPath, kvmPath string) bool {
	info, err := os.ReadFile(cpuinfoPath)
	if err != nil {
		return false
	}
	msg := kvmhost.Denied(string(info), kvmPath)
	if msg == "" {
		return false
	}
	fmt.Fprintf(w, "boxlite: warning: %s\n", msg)
	return true
}
