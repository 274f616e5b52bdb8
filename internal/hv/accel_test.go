package hv

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestDetect(t *testing.T) {
	const (
		vmx = "processor\t: 0\nflags\t\t: fpu vme vmx sse2\n\nprocessor\t: 1\nflags\t\t: fpu\n"
		svm = "flags\t\t: fpu svm\n"
		no  = "flags\t\t: fpu sse2 hypervisor\n"
	)
	for _, tc := range []struct {
		cpuinfo string
		kvmErr  error
		pvm     bool
		accel   Accel
		reason  string
	}{
		{vmx, nil, false, KVM, "kvm: VMX present and /dev/kvm usable"},
		{svm, nil, false, KVM, "kvm: SVM present and /dev/kvm usable"},
		{vmx, os.ErrNotExist, false, TCG, "tcg: VMX present but there is no /dev/kvm"},
		{vmx, os.ErrPermission, false, TCG, "tcg: VMX present but /dev/kvm is not usable"},
		{no, nil, true, TCG, "tcg: CPU has no VMX/SVM (/dev/kvm is kvm_pvm, software only)"},
		{no, nil, false, TCG, "tcg: CPU has no VMX/SVM (/dev/kvm exists but is not hardware KVM)"},
		{no, os.ErrNotExist, false, TCG, "tcg: CPU has no VMX/SVM and no usable /dev/kvm"},
	} {
		a, reason := detect(tc.cpuinfo, tc.kvmErr, tc.pvm)
		if a != tc.accel || !strings.HasPrefix(reason, tc.reason) {
			t.Errorf("detect(%q, %v, %v) = %q, %q; want %q, %q", tc.cpuinfo, tc.kvmErr, tc.pvm, a, reason, tc.accel, tc.reason)
		}
	}
}

func TestDetectAccelHost(t *testing.T) {
	t.Setenv(EnvAccel, "")
	a, reason, err := DetectAccel()
	if err != nil || (a != KVM && a != TCG) || !strings.HasPrefix(reason, string(a)+": ") {
		t.Fatalf("DetectAccel() = %q, %q, %v", a, reason, err)
	}
	t.Logf("this host: %s", reason)
}

func TestDetectAccelEnv(t *testing.T) {
	for _, v := range []string{"kvm", "TCG", " tcg "} {
		t.Setenv(EnvAccel, v)
		a, reason, err := DetectAccel()
		want := Accel(strings.ToLower(strings.TrimSpace(v)))
		if err != nil || a != want || reason != string(want)+": forced by BOXLITE_ACCEL" {
			t.Errorf("%s=%q: DetectAccel() = %q, %q, %v", EnvAccel, v, a, reason, err)
		}
	}
	t.Setenv(EnvAccel, "hvf")
	if _, _, err := DetectAccel(); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), EnvAccel) {
		t.Errorf("invalid %s: err = %v, want ErrInvalidArgument naming it", EnvAccel, err)
	}
}

func TestHostTSCkHz(t *testing.T) {
	khz, err := HostTSCkHz()
	if err != nil {
		t.Fatal(err)
	}
	if khz < 100_000 || khz > 10_000_000 {
		t.Fatalf("HostTSCkHz() = %d, outside 0.1 to 10 GHz", khz)
	}
	info, _ := os.ReadFile(procCPUInfo)
	m, ok := measureTSCkHz()
	t.Logf("HostTSCkHz %d; cpu MHz says %d kHz; measured %d kHz (ok %v)", khz, cpuMHzkHz(string(info)), m, ok)
}

func TestPickTSC(t *testing.T) {
	for _, tc := range []struct {
		listed, measured int
		ok               bool
		want             int
	}{
		{2300000, 2300420, true, 2300000}, // agree: the exact listed figure
		{800000, 2300420, true, 2300420},  // cpufreq moved "cpu MHz": measured
		{2300000, 0, false, 2300000},      // nothing measured
		{0, 2300420, true, 2300420},       // nothing listed
	} {
		if got, err := pickTSC(tc.listed, tc.measured, tc.ok); err != nil || got != tc.want {
			t.Errorf("pickTSC(%d, %d, %v) = %d, %v; want %d", tc.listed, tc.measured, tc.ok, got, err, tc.want)
		}
	}
	if _, err := pickTSC(0, 0, false); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("pickTSC with nothing: err = %v, want ErrUnsupported", err)
	}
	if got := cpuMHzkHz("model name\t: x\ncpu MHz\t\t: 2899.998\n"); got != 2899998 {
		t.Errorf("cpuMHzkHz = %d", got)
	}
}
