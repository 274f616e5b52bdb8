package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one file of a test layer.
type entry struct {
	name string
	typ  byte // tar.TypeReg when 0
	body string
	mode int64 // 0644 (0755 for dirs) when 0
	link string
}

func layerTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil && h.Size > 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testImage builds an image from layer tars (bottom first) and a config.
func testImage(t *testing.T, cfg v1.Config, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// simpleImage is a one-layer image whose content depends on seed.
func simpleImage(t *testing.T, seed string) v1.Image {
	return testImage(t, v1.Config{Cmd: []string{"/bin/" + seed}},
		layerTar(t, entry{name: "bin/", typ: tar.TypeDir}, entry{name: "bin/" + seed, body: "#!" + seed, mode: 0o755}))
}

// writeArchive writes imgs as a docker archive, as docker save does.
func writeArchive(t *testing.T, path string, imgs map[string]v1.Image) {
	t.Helper()
	m := map[name.Tag]v1.Image{}
	for ref, img := range imgs {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		m[tag] = img
	}
	if err := tarball.MultiWriteToFile(path, m); err != nil {
		t.Fatal(err)
	}
}

// writeLayout writes img into an OCI layout at dir, with an index.json entry per ref.name value.
func writeLayout(t *testing.T, dir string, img v1.Image, refNames ...string) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range refNames {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: n})); err != nil {
			t.Fatal(err)
		}
	}
}

// tarDir packs dir into the tar file path.
func tarDir(t *testing.T, dir, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// snapshot lists every file under dir with its size, to see that nothing changed.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && fi.Name() != "lock" && filepath.Ext(p) != ".lock" {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, fmt.Sprint(rel, " ", fi.Size(), " ", fi.ModTime().UnixNano()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func openStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// unlimited reads a layer tar within the default limits, for fixLayer.
func unlimited(r io.Reader) *layerReader { return newLayerReader(r, DefaultLimits, nil, "layer") }
