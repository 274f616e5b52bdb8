package hv

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/kvmhost"
)

// Accel is how QEMU runs guest code.
type Accel string

const (
	// KVM runs the guest on hardware virtualization (VMX/SVM) through /dev/kvm.
	KVM Accel = "kvm"
	// TCG emulates the guest CPU in software: about 20x slower, works anywhere.
	TCG Accel = "tcg"
)

// EnvAccel names the environment variable that overrides DetectAccel.
const EnvAccel = "BOXLITE_ACCEL"

const (
	procCPUInfo = kvmhost.CPUInfo
	devKVM      = kvmhost.DevKVM
)

// DetectAccel picks KVM only when the CPU flags in /proc/cpuinfo have vmx or
// svm and /dev/kvm opens read-write; otherwise TCG. A /dev/kvm without
// VMX/SVM (such as the software kvm_pvm module) is not used: a stock guest
// kernel does not run on it. BOXLITE_ACCEL=kvm|tcg overrides the detection;
// any other non-empty value is an error wrapping errdefs.ErrInvalidArgument.
// reason is a short sentence for logs and box info, e.g.
// "tcg: CPU has no VMX/SVM (/dev/kvm is kvm_pvm, software only)".
func DetectAccel() (accel Accel, reason string, err error) {
	if v := strings.TrimSpace(os.Getenv(EnvAccel)); v != "" {
		a, err := ParseAccel(v)
		if err != nil {
			return "", "", fmt.Errorf("hv: %s: %w", EnvAccel, err)
		}
		return a, fmt.Sprintf("%s: forced by %s", a, EnvAccel), nil
	}
	info, err := os.ReadFile(procCPUInfo)
	if err != nil {
		// Without the flags we cannot tell hardware from software KVM.
		return TCG, fmt.Sprintf("tcg: cannot read %s (%v)", procCPUInfo, err), nil
	}
	a, reason := detect(string(info), kvmhost.OpenKVM(devKVM), isDir("/sys/module/kvm_pvm"))
	return a, reason, nil
}

// ParseAccel parses "kvm" or "tcg" (any case); anything else is an error
// wrapping errdefs.ErrInvalidArgument.
func ParseAccel(s string) (Accel, error) {
	switch a := Accel(strings.ToLower(strings.TrimSpace(s))); a {
	case KVM, TCG:
		return a, nil
	}
	return "", fmt.Errorf("accel %q: want %q or %q: %w", s, KVM, TCG, errdefs.ErrInvalidArgument)
}

// detect is DetectAccel's decision, apart from the host: cpuinfo is the text
// of /proc/cpuinfo, kvmErr the result of opening /dev/kvm read-write, pvm
// whether the kvm_pvm module is loaded.
func detect(cpuinfo string, kvmErr error, pvm bool) (Accel, string) {
	hw := kvmhost.HardwareVirt(cpuinfo)
	switch {
	case hw != "" && kvmErr == nil:
		return KVM, fmt.Sprintf("kvm: %s present and %s usable", hw, devKVM)
	case hw != "" && errors.Is(kvmErr, os.ErrNotExist):
		return TCG, fmt.Sprintf("tcg: %s present but there is no %s (kvm module not loaded?)", hw, devKVM)
	case hw != "" && errors.Is(kvmErr, os.ErrPermission):
		return TCG, fmt.Sprintf("tcg: %s present but %s is not usable: %v; %s", hw, devKVM, kvmErr, kvmhost.GroupFix)
	case hw != "":
		return TCG, fmt.Sprintf("tcg: %s present but %s is not usable: %v", hw, devKVM, kvmErr)
	case pvm:
		return TCG, fmt.Sprintf("tcg: CPU has no VMX/SVM (%s is kvm_pvm, software only)", devKVM)
	case kvmErr == nil:
		return TCG, fmt.Sprintf("tcg: CPU has no VMX/SVM (%s exists but is not hardware KVM)", devKVM)
	default:
		return TCG, fmt.Sprintf("tcg: CPU has no VMX/SVM and no usable %s", devKVM)
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

var hostTSC struct {
	once sync.Once
	khz  int
	err  error
}

// HostTSCkHz returns the host TSC frequency in kHz, for the guest kernel's
// tsc_early_khz= under TCG (QEMU's TCG passes the host TSC through to the
// guest, and microvm has no timer the guest could calibrate it against).
//
// On amd64 it times the TSC against the monotonic clock (about 50 ms, once
// per process). When /proc/cpuinfo's "cpu MHz" agrees within 0.5%, that exact
// figure is returned (inside a VM it is the TSC frequency the hypervisor
// announced); on bare metal "cpu MHz" is the current core clock, which turbo
// and power saving move away from the TSC rate, so the measurement wins. When
// nothing can be measured, "cpu MHz" is used alone.
func HostTSCkHz() (int, error) {
	hostTSC.once.Do(func() {
		hostTSC.khz, hostTSC.err = hostTSCkHz()
	})
	return hostTSC.khz, hostTSC.err
}

func hostTSCkHz() (int, error) {
	info, _ := os.ReadFile(procCPUInfo)
	listed := cpuMHzkHz(string(info))
	measured, ok := 0, false
	if flags := kvmhost.CPUFlags(string(info)); len(flags) == 0 || flags["constant_tsc"] {
		measured, ok = measureTSCkHz()
	}
	return pickTSC(listed, measured, ok)
}

func pickTSC(listed, measured int, measuredOK bool) (int, error) {
	switch {
	case measuredOK && listed > 0 && math.Abs(float64(listed-measured)) <= 0.005*float64(measured):
		return listed, nil
	case measuredOK:
		return measured, nil
	case listed > 0:
		return listed, nil
	}
	return 0, fmt.Errorf("hv: host TSC frequency: no \"cpu MHz\" in %s and no measurement: %w",
		procCPUInfo, errdefs.ErrUnsupported)
}

// cpuMHzkHz returns the first "cpu MHz" of /proc/cpuinfo text in kHz, or 0.
func cpuMHzkHz(cpuinfo string) int {
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || mhz <= 0 {
			return 0
		}
		return int(math.Round(mhz * 1000))
	}
	return 0
}
