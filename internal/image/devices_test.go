package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// dev is a device node entry of a test layer.
type dev struct {
	name         string
	typ          byte
	major, minor int64
}

// devLayer is a layer tar of entries, then devs, then more entries.
func devLayer(t *testing.T, before []entry, devs []dev, after []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	add := func(es []entry) {
		for _, e := range es {
			typ, mode, size := e.typ, e.mode, int64(len(e.body))
			if typ == 0 {
				typ = tar.TypeReg
			}
			if mode == 0 {
				mode = 0o644
			}
			if typ != tar.TypeReg {
				size = 0
			}
			if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, Size: size}); err != nil {
				t.Fatal(err)
			}
			io.WriteString(tw, e.body[:size])
		}
	}
	add(before)
	for _, d := range devs {
		if err := tw.WriteHeader(&tar.Header{Name: d.name, Typeflag: d.typ, Mode: 0o666, Devmajor: d.major, Devminor: d.minor}); err != nil {
			t.Fatal(err)
		}
	}
	add(after)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The nodes a hostile image would ship to reach the VM's own devices.
var hostileNodes = []dev{
	{"dev/vda", tar.TypeBlock, 254, 0}, // virtio-blk: the layers, the box's disk, the lane
	{"dev/vdb", tar.TypeBlock, 254, 16},
	{"dev/vdc", tar.TypeBlock, 254, 32},
	{"dev/kmsg", tar.TypeChar, 1, 11},
	{"dev/console", tar.TypeChar, 5, 1},
	{"dev/mem", tar.TypeChar, 1, 1},
	{"dev/port", tar.TypeChar, 1, 4},
	{"dev/vport0p1", tar.TypeChar, 252, 1},
	{"usr/x", tar.TypeChar, 1, 3}, // anywhere, not only in /dev
}

// TestFixLayerDropsDevices: no device node of a layer reaches tar2ext4, nor
// a hard link to one; the overlay form of a whiteout (a 0:0 character
// device) is an OCI whiteout, and an opaque marker stays one whatever its type.
func TestFixLayerDropsDevices(t *testing.T) {
	in := devLayer(t,
		[]entry{dirEntry("dev/"), dirEntry("usr/"), dirEntry("etc/"), fileEntry("etc/kept"), dirEntry("opq/")},
		append(append([]dev{}, hostileNodes...),
			dev{"etc/gone", tar.TypeChar, 0, 0},         // overlay whiteout of a lower file
			dev{"opq/.wh..wh..opq", tar.TypeChar, 0, 0}, // an opaque marker written as a device
		),
		[]entry{linkEntry("dev/disk", "dev/vda"), fileEntry("etc/.wh.old"), fileEntry("usr/y")},
	)
	_, hs := fixedHeaders(t, in)
	var got []string
	for _, h := range hs {
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			t.Errorf("device %s (%d:%d) passed through", h.Name, h.Devmajor, h.Devminor)
		}
		got = append(got, h.Name+":"+string(h.Typeflag))
	}
	want := []string{"dev/:5", "usr/:5", "etc/:5", "etc/kept:0", "opq/:5", "opq/.wh..wh..opq:0", "usr/y:0",
		"etc/.wh.gone:0", "etc/.wh.old:0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestRootfsDropsDevices converts an image whose top layer ships device
// nodes: its ext4 image has none of them, while both forms of whiteout still
// hide the lower layer's files (0:0 character devices, which overlayfs reads
// as whiteouts), and the opaque directory stays opaque.
func TestRootfsDropsDevices(t *testing.T) {
	if !haveTools(t) {
		t.Fatal("e2fsck and debugfs not found (apt-get install e2fsprogs)")
	}
	bottom := layerTar(t, dirEntry("dev/"), dirEntry("etc/"), fileEntry("etc/oci-deleted"), fileEntry("etc/overlay-deleted"),
		fileEntry("etc/kept"), dirEntry("opq/"), fileEntry("opq/old"))
	top := devLayer(t, []entry{dirEntry("dev/"), dirEntry("usr/"), dirEntry("etc/"), fileEntry("etc/.wh.oci-deleted"), dirEntry("opq/")},
		append(append([]dev{}, hostileNodes...), dev{"etc/overlay-deleted", tar.TypeChar, 0, 0}, dev{"opq/.wh..wh..opq", tar.TypeChar, 0, 0}),
		[]entry{fileEntry("opq/new")})
	s, _ := openStore(t)
	img := loadImage(t, s, "devices:1", testImage(t, v1.Config{}, bottom, top))
	paths, err := s.Rootfs(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, paths[1])
	for _, d := range hostileNodes {
		if st := debugfs(t, paths[1], "stat /"+d.name); !strings.Contains(st, "File not found") {
			t.Errorf("/%s is in the layer:\n%s", d.name, st)
		}
	}
	for _, p := range []string{"/etc/oci-deleted", "/etc/overlay-deleted"} {
		st := debugfs(t, paths[1], "stat "+p)
		if !strings.Contains(st, "Type: character special") || !strings.Contains(st, "Device major/minor number: 00:00") {
			t.Errorf("%s is no whiteout:\n%s", p, st)
		}
	}
	if ea := debugfs(t, paths[1], "ea_list /opq"); !strings.Contains(ea, `trusted.overlay.opaque (1) = "y"`) {
		t.Errorf("/opq is not opaque: %s", ea)
	}
	if ls := debugfs(t, paths[1], "ls /opq"); strings.Contains(ls, ".wh.") || !strings.Contains(ls, "new") {
		t.Errorf("/opq: %s", ls)
	}
}

// TestRootfsOldFormatNotReused: a layer converted by an older rule (format
// 1, <hex>.ext4, which kept device nodes) is converted again, never
// returned, and removed.
func TestRootfsOldFormatNotReused(t *testing.T) {
	s, dir := openStore(t)
	img := loadImage(t, s, "old:1", simpleImage(t, "old"))
	hex := strings.TrimPrefix(img.Layers[0].DiffID, "sha256:")
	olds := []string{filepath.Join(dir, "layers", hex+".ext4"), filepath.Join(dir, "layers", hex+".v1.ext4")}
	for _, p := range olds {
		if err := os.WriteFile(p, []byte("a layer converted by an older boxlite"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := conversions.Load()
	paths, err := s.Rootfs(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "layers", hex+layerSuffix); len(paths) != 1 || paths[0] != want || conversions.Load()-before != 1 {
		t.Fatalf("paths %v (want %s), %d conversions", paths, want, conversions.Load()-before)
	}
	for _, p := range olds {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	for name, stale := range map[string]bool{hex + ".ext4": true, hex + ".v1.ext4": true, hex + ".v12.ext4": true,
		hex + layerSuffix: false, hex + ".lock": false, "." + hex + layerSuffix + ".tmp-1": false, hex + ".vx.ext4": false} {
		if staleLayer(hex, name) != stale {
			t.Errorf("staleLayer(%s) = %v", name, !stale)
		}
	}
}
