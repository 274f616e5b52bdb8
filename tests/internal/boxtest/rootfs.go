package boxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BusyboxRoot makes a minimal root file system at dir: Debian's static
// busybox as /bin/busybox and /bin/sh, and empty /etc, /proc, /dev, /sys
// and /tmp. It fails when busybox-static is not installed (`make setup`).
func BusyboxRoot(dir string) error {
	for _, d := range []string{"bin", "etc", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is not installed (`make setup`): %w", err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), b, 0o755); err != nil {
		return err
	}
	return os.Symlink("busybox", filepath.Join(dir, "bin", "sh"))
}
