package boxlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
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

// A volume is resolved once, at create, and keeps its file: a config that
// already has the identity (a clone's) must still lead to that file,
// following no symlink.
func TestValidateVolumesIdentity(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	c := defaultBoxConfig("alpine:latest")
	WithVolume(link, "/data", false)(&c)
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	v := c.Volumes[0]
	if v.HostPath != real || v.HostID == nil || v.HostID.Type != "dir" {
		t.Fatalf("volume after validate: %+v, want %s with its identity", v, real)
	}
	// Validating again (as Clone does) keeps it.
	if err := c.validate(); err != nil || c.Volumes[0].HostPath != v.HostPath || *c.Volumes[0].HostID != *v.HostID {
		t.Fatalf("again: %v, %+v", err, c.Volumes[0])
	}
	// The path swapped for a symlink to elsewhere, then for another
	// directory: refused, naming the volume.
	os.Rename(real, real+".moved")
	os.Symlink(dir, real)
	for _, what := range []string{"symlink", "another directory"} {
		err := c.validate()
		var ve *shimapi.VolumeError
		if !errors.Is(err, errdefs.ErrInvalidState) || !errors.As(err, &ve) || ve.GuestPath != "/data" {
			t.Errorf("%s: %v, want an invalid state naming /data", what, err)
		}
		os.Remove(real)
		os.Mkdir(real, 0o755)
	}
	// A forged identity given with the option is dropped.
	c = defaultBoxConfig("alpine:latest")
	WithVolumeSpec(Volume{HostPath: dir, GuestPath: "/d", HostID: &shimapi.FileID{Inode: 1, Type: "dir"}})(&c)
	if err := c.validate(); err != nil || c.Volumes[0].HostID.Inode == 1 {
		t.Fatalf("forged identity: %v %+v", err, c.Volumes[0].HostID)
	}
}

func TestValidateVolumeSizeLimit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		v  Volume
		ok bool
	}{
		{Volume{HostPath: dir, GuestPath: "/d", SizeLimitBytes: 64 << 20}, true},
		{Volume{HostPath: dir, GuestPath: "/d", SizeLimitBytes: 1000}, false},
		{Volume{HostPath: dir, GuestPath: "/d", SizeLimitBytes: -1}, false},
		{Volume{HostPath: dir, GuestPath: "/d", SizeLimitBytes: 64 << 20, ReadOnly: true}, false},
		{Volume{HostPath: file, GuestPath: "/f", SizeLimitBytes: 64 << 20}, false},
	} {
		cfg := defaultBoxConfig("alpine:latest")
		WithVolumeSpec(c.v)(&cfg)
		if err := cfg.validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.v, err)
		}
	}
}
