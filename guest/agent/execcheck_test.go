//go:build linux

package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// execCheck answers alike by openat2 and by resolveIn (its fallback):
// symlinks and ".." stay inside root, directories and files without an
// execute bit are refused.
func TestExecCheckInRoot(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "prog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "usr/bin", "data"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{"bin/prog": 0o755, "bin/plain": 0o644}
	for name, mode := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"usr/bin/abs":    "/bin/prog",                                  // absolute: inside root
		"usr/bin/rel":    "../../bin/prog",                             // relative
		"usr/bin/escape": "../../../../../../" + outside[1:] + "/prog", // climbs to root, not out
		"usr/bin/host":   outside + "/prog",                            // the host's path, read in root
		"usr/bin/loop":   "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		path string
		want error // nil, or what errors.Is must match
	}{
		{"/bin/prog", nil},
		{"/usr/bin/abs", nil},
		{"/usr/bin/rel", nil},
		{"/../../bin/prog", nil},
		{"/usr/bin/escape", fs.ErrNotExist},
		{"/usr/bin/host", fs.ErrNotExist},
		{"/bin/plain", errNotExecutable},
		{"/data", unix.EISDIR},
		{"/bin/missing", fs.ErrNotExist},
		{"/bin/prog/x", unix.ENOTDIR},
		{"/usr/bin/loop", unix.ELOOP},
	}
	for _, byOpenat2 := range []bool{true, false} {
		check := newExecCheck(root)
		if !byOpenat2 {
			check.close() // resolveIn
		}
		for _, c := range cases {
			err := check.executable(c.path)
			if (c.want == nil) != (err == nil) || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("openat2 %v: %s: %v, want %v", byOpenat2, c.path, err, c.want)
			}
		}
		check.close()
	}
}
