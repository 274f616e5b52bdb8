package shim

import "testing"

func TestTmpfsWarning(t *testing.T) {
	if tmpfsWarning("/dev/shm") == "" {
		t.Error("no warning for /dev/shm, a tmpfs")
	}
	if w := tmpfsWarning("/proc"); w != "" {
		t.Errorf("warning for /proc: %s", w)
	}
}
