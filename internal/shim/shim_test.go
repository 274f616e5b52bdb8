package shim

import (
	"strings"
	"testing"
)

func TestTmpfsWarning(t *testing.T) {
	if tmpfsWarning("/dev/shm") == "" {
		t.Error("no warning for /dev/shm, a tmpfs")
	}
	if w := tmpfsWarning("/proc"); w != "" {
		t.Errorf("warning for /proc: %s", w)
	}
}

func TestParentGone(t *testing.T) {
	for in, want := range map[string]string{
		"": "the process that created the box exited",
		"box disconnected: agent protocol violation: x\x00\n": "the runtime that created the box disconnected: box disconnected: agent protocol violation: x",
		strings.Repeat("y", 5000):                             "the runtime that created the box disconnected: " + strings.Repeat("y", 256),
	} {
		if got := parentGone(strings.NewReader(in)); got != want {
			t.Errorf("parentGone(%.20q) = %q, want %q", in, got, want)
		}
	}
}
