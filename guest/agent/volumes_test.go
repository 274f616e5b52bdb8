//go:build linux

package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseVolumes(t *testing.T) {
	vols, err := parseVolumes(`console=ttyS0 boxlite.vol=0:rw:d:/data boxlite.vol=3:ro:f:/etc/a%20b.conf quiet`)
	want := []volume{{Index: 0, GuestPath: "/data"}, {Index: 3, ReadOnly: true, File: true, GuestPath: "/etc/a b.conf"}}
	if err != nil || !reflect.DeepEqual(vols, want) {
		t.Fatalf("got %+v, %v", vols, err)
	}
	for _, bad := range []string{"boxlite.vol=0:rw:d", "boxlite.vol=x:rw:d:/a", "boxlite.vol=0:rx:d:/a",
		"boxlite.vol=0:rw:d:a", "boxlite.vol=0:rw:d:/", "boxlite.vol=0:rw:d:/a/../b", "boxlite.vol=0:rw:z:/a"} {
		if _, err := parseVolumes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Mount points are made inside the root, whatever symlinks the image has.
func TestMountPoint(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "abs")) // resolves inside root, where it dangles
	os.Symlink("../../..", filepath.Join(root, "up"))
	os.Mkdir(filepath.Join(root, "real"), 0o755)
	os.Symlink("/real", filepath.Join(root, "in"))
	if p, err := mountPoint(root, "/abs/sub/dir", false); err == nil {
		t.Fatalf("through a dangling link: got %q", p)
	}
	p, err := mountPoint(root, "/in/sub", false)
	if err != nil || p != filepath.Join(root, "real", "sub") {
		t.Fatalf("got %q, %v", p, err)
	}
	if p, err = mountPoint(root, "/up/x", false); err != nil || p != filepath.Join(root, "x") {
		t.Fatalf("got %q, %v", p, err)
	}
	if p, err = mountPoint(root, "/etc/app.conf", true); err != nil || p != filepath.Join(root, "etc", "app.conf") {
		t.Fatalf("got %q, %v", p, err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("file mount point: %v %v", fi, err)
	}
	if _, err := mountPoint(root, "/etc/app.conf", false); err == nil {
		t.Fatal("a file where a directory volume goes: no error")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("created outside the root: %v", entries)
	}
}
