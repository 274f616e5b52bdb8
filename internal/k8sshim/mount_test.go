package k8sshim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/api/types"
	"golang.org/x/sys/unix"
)

// TestPlaceContainer mounts a rootfs as containerd's overlay snapshotter
// would, places it and two volumes in a pod's shared directory, and takes
// it all down again. Mounting needs root (the shim runs as root).
func TestPlaceContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount (the shim runs as root; make test does)")
	}
	tmp := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(tmp, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lower, upper, work, bundle, vol := mk("lower"), mk("upper"), mk("work"), mk("bundle"), mk("vol")
	if err := os.WriteFile(filepath.Join(lower, "image-file"), []byte("img"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(tmp, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := &spec{Process: &process{Args: []string{"true"}}, Mounts: []specMount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/data", Type: "bind", Source: vol, Options: []string{"rbind", "rw"}},
		{Destination: "/etc/hosts", Type: "bind", Source: hosts, Options: []string{"rbind", "ro"}},
	}}
	ms := []*types.Mount{{Type: "overlay", Source: "overlay",
		Options: []string{"workdir=" + work, "upperdir=" + upper, "lowerdir=" + lower}}}
	rootfs, mounted, err := prepareRootfs(bundle, sp, ms)
	if err != nil || !mounted {
		t.Fatal(mounted, err)
	}
	p, err := newPod("p1", bundle)
	if err != nil {
		t.Fatal(err)
	}
	c := &container{id: "c1", rootfs: rootfs}
	if err := c.place(p, sp); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(p.share, "c1", "rootfs", "image-file")); err != nil || string(b) != "img" {
		t.Errorf("rootfs in the share: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(p.share, "c1", "m0", "w"), []byte("x"), 0o644); err != nil {
		t.Errorf("rw volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vol, "w")); err != nil {
		t.Errorf("the volume's write is not in the host folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(p.share, "c1", "m1"), []byte("y"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("read-only hosts file: %v", err)
	}
	want := []string{containersDir + "/c1/m0:/data:false", containersDir + "/c1/m1:/etc/hosts:true"}
	if len(c.rootBinds) != 2 {
		t.Fatalf("root binds %+v", c.rootBinds)
	}
	for i, rb := range c.rootBinds {
		if got := rb.Source + ":" + rb.Target + ":" + map[bool]string{true: "true", false: "false"}[rb.ReadOnly]; got != want[i] {
			t.Errorf("bind %d: %s, want %s", i, got, want[i])
		}
	}
	c.unplace()
	p.removeShare()
	if err := unmountAll(rootfs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.share); !os.IsNotExist(err) {
		t.Errorf("share left: %v", err)
	}
	if ents, _ := os.ReadDir(rootfs); len(ents) != 0 {
		t.Errorf("rootfs still mounted: %v", ents)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "w")); err != nil || string(b) != "x" {
		t.Errorf("the volume's data went with the pod: %q %v", b, err)
	}
}

// makeTarget makes mount points inside a root, and a symlink in the root
// never leads it outside.
func TestMakeTarget(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../..", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	if err := makeTarget(root, "/etc/x", true); err == nil {
		t.Error("made a mount point through a dangling symlink")
	}
	if err := os.MkdirAll(root+outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    string
		file bool
		made string
	}{
		{"/etc/resolv.conf", true, outside + "/resolv.conf"},
		{"/up/data/x", false, "/data/x"},
		{"/a/b", false, "/a/b"},
	} {
		if err := makeTarget(root, c.p, c.file); err != nil {
			t.Fatalf("%s: %v", c.p, err)
		}
		fi, err := os.Lstat(filepath.Join(root, c.made))
		if err != nil || fi.IsDir() == c.file {
			t.Errorf("%s: %v %v", c.p, fi, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made %v outside the root", ents)
	}
	if err := makeTarget(root, "/a/b", false); err != nil {
		t.Errorf("an existing mount point: %v", err)
	}
}
