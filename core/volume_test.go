package core

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestValidateVolumes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	cfg := func(opts ...BoxOption) error {
		c := defaultBoxConfig("alpine:latest")
		for _, o := range opts {
			o(&c)
		}
		return c.validate()
	}
	if err := cfg(WithVolume(dir, "/data", false), WithVolume(file, "/etc/f", true)); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := cfg(WithVolume(missing, "/data", false)); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing host path: %v", err)
	}
	for name, opts := range map[string][]BoxOption{
		"relative guest": {WithVolume(dir, "data", false)},
		"unclean guest":  {WithVolume(dir, "/a/../b", false)},
		"root":           {WithVolume(dir, "/", false)},
		"proc":           {WithVolume(dir, "/proc/x", false)},
		"dev":            {WithVolume(dir, "/dev", false)},
		"duplicate":      {WithVolume(dir, "/a", false), WithVolume(dir, "/a", true)},
		"empty host":     {WithVolume("", "/a", false)},
		"device":         {WithVolume("/dev/null", "/a", false)},
		"long paths":     {WithVolume(dir, "/"+strings.Repeat("x", maxVolumePathBytes), false)},
	} {
		if err := cfg(opts...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	var many []BoxOption
	for i := 0; i <= MaxVolumes; i++ {
		many = append(many, WithVolume(dir, "/v"+strings.Repeat("x", i), false))
	}
	if err := cfg(many...); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("%d volumes: %v", len(many), err)
	}
	c := defaultBoxConfig("alpine:latest")
	WithVolume(".", "/here", false)(&c)
	if err := c.validate(); err != nil || !filepath.IsAbs(c.Volumes[0].HostPath) {
		t.Fatalf("relative host path: %v %q", err, c.Volumes[0].HostPath)
	}
}
