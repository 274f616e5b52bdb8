package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Microsoft/hcsshim/ext4/tar2ext4"

	"github.com/boxlite/boxlite/errdefs"
)

var body = strings.Repeat("x", 100) // not inline: tar2ext4 cannot replace such a file

func dirEntry(name string) entry  { return entry{name: name, typ: tar.TypeDir} }
func fileEntry(name string) entry { return entry{name: name, body: body} }
func linkEntry(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func TestFixLayerWhiteouts(t *testing.T) {
	in := layerTar(t,
		dirEntry("./"),
		fileEntry("./.wh.top"),  // a lower file: stays a whiteout
		dirEntry("data/"),       //
		fileEntry("data/.wh.d"), // a lower d replaced by a directory: opaque
		dirEntry("data/d/"),     //
		fileEntry("data/d/x"),   //
		fileEntry("data/f"),     // the whiteout of f comes after f: dropped
		fileEntry("data/.wh.f"), //
		fileEntry("data/.wh.i"), // i is implied by i/y: opaque
		fileEntry("data/i/y"),   //
		fileEntry("data/s/.wh..wh..opq"),
		dirEntry("data/s/"),
	)
	fixed, hs := fixedHeaders(t, in)
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	want := []string{"./", "data/", "data/d/", "data/d/x", "data/f", "data/i/y", "data/s/.wh..wh..opq", "data/s/",
		"data/d/.wh..wh..opq", "data/i/.wh..wh..opq", ".wh.top"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("got %q\nwant %q", names, want)
	}

	// Unfixed, tar2ext4 refuses the layer; fixed, it converts it.
	img := filepath.Join(t.TempDir(), "layer.ext4")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tar2ext4.ConvertTarToExt4(bytes.NewReader(in), f, ext4Options...); err == nil {
		t.Log("tar2ext4 now converts a whiteout followed by a directory of the same name itself")
	}
	f.Truncate(0)
	if err := tar2ext4.ConvertTarToExt4(bytes.NewReader(fixed), f, ext4Options...); err != nil {
		t.Fatal(err)
	}
}

// fixedHeaders runs fixLayer over the layer in and returns what it wrote
// and its headers, each entry's data read to its end (a short one fails).
func fixedHeaders(t *testing.T, in []byte) ([]byte, []*tar.Header) {
	t.Helper()
	var out bytes.Buffer
	if err := fixLayer(&out, unlimited(bytes.NewReader(in))); err != nil {
		t.Fatal(err)
	}
	var hs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(out.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out.Bytes(), hs
		}
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, tr); n != h.Size {
			t.Errorf("%s: %d of %d bytes", h.Name, n, h.Size)
		}
		hs = append(hs, h)
	}
}

func TestFixLayerGlobalHeader(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "git"}})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644})
	tw.Close()
	var out bytes.Buffer
	if err := fixLayer(&out, unlimited(&in)); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	if h, err := tr.Next(); err != nil || h.Name != "a" {
		t.Fatalf("first entry %+v, %v", h, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("more entries: %v", err)
	}
}

func TestFixLayerHardLinks(t *testing.T) {
	ok := layerTar(t, fileEntry("a"), linkEntry("b", "./a"), linkEntry("c", "b"))
	if err := fixLayer(io.Discard, unlimited(bytes.NewReader(ok))); err != nil {
		t.Fatalf("links within the layer: %v", err)
	}
	for _, in := range [][]byte{
		layerTar(t, linkEntry("b", "lower")),
		layerTar(t, dirEntry("d/"), linkEntry("b", "d")),
	} {
		if err := fixLayer(io.Discard, unlimited(bytes.NewReader(in))); !errors.Is(err, errdefs.ErrUnsupported) {
			t.Errorf("want ErrUnsupported, got %v", err)
		}
	}
}

// TestExt4Time encodes times as tar2ext4 does and decodes them as Linux does.
func TestExt4Time(t *testing.T) {
	encode := func(s int64) (lo uint32, epoch int64) { // tar2ext4 timeToFsTime, seconds part
		if s > 0x37fffffff {
			s = 0x37fffffff
		}
		return uint32(s), (s >> 32) & 3
	}
	decode := func(lo uint32, epoch int64) int64 { return int64(int32(lo)) + epoch<<32 } // ext4_decode_extra_time
	for _, s := range []int64{-1 << 31, -86400 * 365, -1, 0, 1, 1700000000, 1<<31 - 1, 1 << 31, 2200000000, 1<<32 - 1, 1 << 32, 1<<32 + 1<<31, 3 << 32} {
		got := decode(encode(ext4Time(time.Unix(s, 5)).Unix()))
		if got != s {
			t.Errorf("%d: stored as %d", s, got)
		}
		if ns := ext4Time(time.Unix(s, 5)).Nanosecond(); ns != 5 {
			t.Errorf("%d: nanoseconds %d", s, ns)
		}
	}
	if z := ext4Time(time.Time{}); !z.IsZero() {
		t.Errorf("zero time became %v", z)
	}
}
