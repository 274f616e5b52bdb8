package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

const gib100 = 100 << 30 // 107374182400

// gzipped compresses what write writes.
func gzipped(t *testing.T, write func(w io.Writer)) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	write(zw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zeros writes n zero bytes to w without holding them.
func zeros(w io.Writer, n int64) {
	io.CopyN(w, zeroReader{}, n)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// claimedFile is a layer whose one file declares size bytes but holds only
// have of them (the tar ends there): what a bomb looks like to a reader
// that trusts headers.
func claimedFile(t *testing.T, name string, size, have int64) []byte {
	return gzipped(t, func(w io.Writer) {
		tw := tar.NewWriter(w)
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		zeros(tw, have)
		tw.Flush()
	})
}

// zeroFiles is a gzip layer of files of zeros, each size bytes, then trailing
// zero bytes after the tar's end.
func zeroFiles(t *testing.T, n int, size, trailing int64) []byte {
	return gzipped(t, func(w io.Writer) {
		tw := tar.NewWriter(w)
		for i := range n {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: size})
			zeros(tw, size)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		zeros(w, trailing)
	})
}

// tarBlock is a raw tar header block, checksummed: ustar, or GNU with gnu.
func tarBlock(name string, typ byte, size int64, gnu bool, fill func(b []byte)) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], fmt.Sprintf("%011o\x00", 0))
	b[156] = typ
	if gnu {
		copy(b[257:], "ustar  \x00")
	} else {
		copy(b[257:], "ustar\x0000")
	}
	if fill != nil {
		fill(b)
	}
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad512(b []byte) []byte {
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

// gnuSparseTar is a tar with one old-GNU-format sparse file (type 'S') of
// logical size realSize that stores 512 bytes at offset 0.
func gnuSparseTar(name string, realSize int64) []byte {
	hdr := tarBlock(name, tar.TypeGNUSparse, 512, true, func(b []byte) {
		copy(b[386:], fmt.Sprintf("%011o\x00", 0))   // sparse[0].offset
		copy(b[398:], fmt.Sprintf("%011o\x00", 512)) // sparse[0].numbytes
		f := b[483:495]                              // realsize, base-256
		for i, n := len(f)-1, realSize; i > 0; i, n = i-1, n>>8 {
			f[i] = byte(n)
		}
		f[0] = 0x80
	})
	out := append(hdr, bytes.Repeat([]byte{'x'}, 512)...)
	return append(out, make([]byte, 1024)...)
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for {
		s := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// paxSparseTar is a tar with one PAX GNU sparse file of format major.minor
// (1.0: the map heads the data) of logical size realSize, storing 512 bytes.
func paxSparseTar(name string, realSize int64, major, minor string) []byte {
	recs := paxRecord("GNU.sparse.major", major) + paxRecord("GNU.sparse.minor", minor) +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realSize, 10))
	body := append(pad512([]byte("1\n0\n512\n")), bytes.Repeat([]byte{'x'}, 512)...)
	out := tarBlock("PaxHeaders.0/"+name, tar.TypeXHeader, int64(len(recs)), false, nil)
	out = append(out, pad512([]byte(recs))...)
	out = append(out, tarBlock("GNUSparseFile.0/"+name, tar.TypeReg, int64(len(body)), false, nil)...)
	out = append(out, body...)
	return append(out, make([]byte, 1024)...)
}

func gz(t *testing.T, b []byte) []byte {
	return gzipped(t, func(w io.Writer) { w.Write(b) })
}

// rawImage is an image made of given blobs, for content go-containerregistry
// would not build (layers it cannot read whole, a config of a claimed size).
type rawImage struct {
	manifest, config []byte
	layers           map[v1.Hash][]byte
}

// newRawImage makes an image of gzip layers; configSize, if not 0, is the
// config size the manifest claims.
func newRawImage(t *testing.T, configSize int64, layers ...[]byte) *rawImage {
	t.Helper()
	r := &rawImage{layers: map[v1.Hash][]byte{}}
	cf := v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH, RootFS: v1.RootFS{Type: "layers"}}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	for _, l := range layers {
		u, err := gzip.NewReader(bytes.NewReader(l))
		if err != nil {
			t.Fatal(err)
		}
		diffID, _, _ := v1.SHA256(u) // of what the layer holds, truncated or not
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, diffID)
		d := sha256Hash(l)
		r.layers[d] = l
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: int64(len(l)), Digest: d})
	}
	r.config, _ = json.Marshal(cf)
	m.Config = v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(r.config)), Digest: sha256Hash(r.config)}
	if configSize != 0 {
		m.Config.Size = configSize
	}
	r.manifest, _ = json.Marshal(m)
	return r
}

func (r *rawImage) RawConfigFile() ([]byte, error)      { return r.config, nil }
func (r *rawImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (r *rawImage) RawManifest() ([]byte, error)        { return r.manifest, nil }
func (r *rawImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if b, ok := r.layers[h]; ok {
		return bytesLayer{b}, nil
	}
	return nil, fmt.Errorf("no layer %s", h)
}

func (r *rawImage) image(t *testing.T) v1.Image {
	img, err := partial.CompressedToImage(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func (r *rawImage) digest() v1.Hash { return sha256Hash(r.manifest) }

type bytesLayer struct{ b []byte }

func (l bytesLayer) Digest() (v1.Hash, error) { return sha256Hash(l.b), nil }
func (l bytesLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.b)), nil
}
func (l bytesLayer) Size() (int64, error)                { return int64(len(l.b)), nil }
func (l bytesLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// writeRawLayout writes r as an OCI layout in dir, blob by blob.
func writeRawLayout(t *testing.T, dir string, r *rawImage) {
	t.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	os.MkdirAll(blobs, 0o755)
	put := func(b []byte) {
		if err := os.WriteFile(filepath.Join(blobs, sha256Hash(b).Hex), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(r.manifest)
	put(r.config)
	for _, l := range r.layers {
		put(l)
	}
	ix := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.OCIManifestSchema1, Size: int64(len(r.manifest)), Digest: r.digest(),
		Annotations: map[string]string{refNameAnnotation: "example.com/bomb:1"},
	}}}
	b, _ := json.Marshal(ix)
	os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// writeRawArchive writes r as a docker archive (gzip layers, as older docker
// and go-containerregistry's tarball accept) at path.
func writeRawArchive(t *testing.T, path string, r *rawImage) {
	t.Helper()
	var m v1.Manifest
	json.Unmarshal(r.manifest, &m)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	entry := map[string]any{"Config": "config.json", "RepoTags": []string{"example.com/bomb:1"}}
	var layers []string
	for i, l := range m.Layers {
		n := fmt.Sprintf("layer%d.tar.gz", i)
		add(n, r.layers[l.Digest])
		layers = append(layers, n)
	}
	entry["Layers"] = layers
	mj, _ := json.Marshal([]any{entry})
	add("config.json", r.config)
	add("manifest.json", mj)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// diskUsage is the disk space the files under dir take (sparse files count
// for what they hold).
func diskUsage(t *testing.T, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

// refused checks that err is ErrLimit (or kind) saying each of want, and that
// the store in dir is as before and small.
// loadRefused loads src into a new store and checks it is refused as
// over a limit, with want in the error and nothing left in the store.
func loadRefused(t *testing.T, src string, want ...string) {
	t.Helper()
	s, dir := openStore(t)
	before := snapshot(t, dir)
	_, err := s.Load(context.Background(), src)
	refused(t, err, errdefs.ErrLimit, dir, before, want...)
}

func refused(t *testing.T, err error, kind error, dir string, before []string, want ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("want %v, got %v", kind, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("the store changed:\n%v\n%v", before, after)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("tmp not empty: %v", entries)
	}
	if n := diskUsage(t, dir); n > 4<<20 {
		t.Errorf("the store takes %d bytes of disk", n)
	}
}

// bombs are layers each of which one of the limits refuses.
func bombs(t *testing.T) []struct {
	name   string
	limits Limits
	layers [][]byte
	kind   error
	want   []string
} {
	deep := strings.Repeat("d/", 150) + "f"
	return []struct {
		name   string
		limits Limits
		layers [][]byte
		kind   error
		want   []string
	}{
		{"declared 100 GiB file, default limits", Limits{}, [][]byte{claimedFile(t, "usr/big", gib100, 1<<20)}, errdefs.ErrLimit,
			[]string{"file usr/big: 107374182400 bytes, limit 8589934592"}},
		{"100 MiB of zeros, 64 MiB file limit", Limits{MaxFileBytes: 64 << 20}, [][]byte{zeroFiles(t, 1, 100<<20, 0)}, errdefs.ErrLimit,
			[]string{"file f0: 104857600 bytes, limit 67108864"}},
		{"zeros after the tar's end", Limits{MaxLayerBytes: 64 << 20}, [][]byte{zeroFiles(t, 1, 10, 128<<20)}, errdefs.ErrLimit,
			[]string{"bytes uncompressed, limit 67108864"}},
		{"GNU sparse file of 100 GiB", Limits{}, [][]byte{gz(t, gnuSparseTar("big.img", gib100))}, errdefs.ErrLimit,
			[]string{"file big.img: 107374182400 bytes, limit 8589934592"}},
		{"PAX sparse file of 100 GiB", Limits{}, [][]byte{gz(t, paxSparseTar("big.img", gib100, "1", "0"))}, errdefs.ErrLimit,
			[]string{"file big.img: 107374182400 bytes, limit 8589934592"}},
		{"sparse file counted at its logical size", Limits{MaxLayerBytes: 8 << 20}, [][]byte{gz(t, gnuSparseTar("s", 16<<20))}, errdefs.ErrLimit,
			[]string{"bytes uncompressed, limit 8388608"}},
		{"PAX sparse of an unknown format", Limits{}, [][]byte{gz(t, paxSparseTar("odd", 1<<20, "2", "0"))}, errdefs.ErrUnsupported,
			[]string{`GNU sparse format "2"."0"`}},
		{"too many entries", Limits{MaxEntries: 100}, [][]byte{zeroFiles(t, 101, 0, 0)}, errdefs.ErrLimit,
			[]string{"101 entries", "limit 100"}},
		{"one entry implying many directories", Limits{MaxEntries: 100}, [][]byte{gz(t, layerTar(t, entry{name: deep, body: "x"}))}, errdefs.ErrLimit,
			[]string{"151 entries (with the directories they imply), limit 100"}},
		{"a name longer than PATH_MAX", Limits{}, [][]byte{gz(t, layerTar(t, entry{name: strings.Repeat("n", 5000), body: "x"}))}, errdefs.ErrLimit,
			[]string{"name or link target of 5000 bytes, limit 4096"}},
		{"image over its limit across two layers", Limits{MaxImageBytes: 5 << 20}, [][]byte{zeroFiles(t, 1, 3<<20, 0), zeroFiles(t, 2, 3<<19, 0)}, errdefs.ErrLimit,
			[]string{"image: ", "bytes uncompressed, limit 5242880"}},
	}
}

func TestLimitsRefuseBombs(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil)
	for i, c := range bombs(t) {
		t.Run(c.name, func(t *testing.T) {
			raw := newRawImage(t, 0, c.layers...)
			src := t.TempDir()
			layoutDir := filepath.Join(src, "layout")
			writeRawLayout(t, layoutDir, raw)
			archive := filepath.Join(src, "docker.tar")
			writeRawArchive(t, archive, raw)
			ref := fmt.Sprintf("%s/bomb%d:1", reg.host, i)
			r, _ := name.ParseReference(ref, name.Insecure)
			if err := remote.Write(r, raw.image(t), remote.WithTransport(reg.Client().Transport)); err != nil {
				t.Fatal(err)
			}
			for _, via := range []string{"layout", "archive", "registry"} {
				t.Run(via, func(t *testing.T) {
					dir := t.TempDir()
					s, err := Open(dir, WithLimits(c.limits))
					if err != nil {
						t.Fatal(err)
					}
					before := snapshot(t, dir)
					want := append([]string{"image " + raw.digest().String() + ": layer sha256:"}, c.want...)
					switch via {
					case "layout":
						_, err = s.Load(ctx, layoutDir)
					case "archive":
						_, err = s.Load(ctx, archive)
						// A docker archive has no manifest (the store makes one): its config names it.
						want[0] = "image config sha256:"
					case "registry":
						_, err = s.Pull(ctx, ref, WithInsecure(reg.host))
					}
					refused(t, err, c.kind, dir, before, want...)
				})
			}
		})
	}
}

func TestLimitsRefuseBigConfigsAndManifests(t *testing.T) {
	ctx := context.Background()
	layer := gz(t, layerTar(t, entry{name: "a", body: "a"}))

	t.Run("config claimed at 100 MB", func(t *testing.T) {
		raw := newRawImage(t, 100_000_000, layer)
		reg := newRegistry(t, nil)
		r, _ := name.ParseReference(reg.host+"/big/config:1", name.Insecure)
		if err := remote.Write(r, raw.image(t), remote.WithTransport(reg.Client().Transport)); err != nil {
			t.Fatal(err)
		}
		blobGets := reg.blobGets.Load()
		s, dir := openStore(t)
		before := snapshot(t, dir)
		_, err := s.Pull(ctx, reg.host+"/big/config:1", WithInsecure(reg.host))
		refused(t, err, errdefs.ErrLimit, dir, before, "image "+raw.digest().String()+": config sha256:", ": 100000000 bytes, limit 4194304")
		if n := reg.blobGets.Load() - blobGets; n != 0 {
			t.Errorf("%d blobs downloaded", n)
		}
		layoutDir := t.TempDir()
		writeRawLayout(t, layoutDir, raw)
		_, err = s.Load(ctx, layoutDir)
		refused(t, err, errdefs.ErrLimit, dir, before, "image "+raw.digest().String()+": config sha256:", ": 100000000 bytes, limit 4194304")
	})

	t.Run("config file of 100 MB in a layout that claims less", func(t *testing.T) {
		raw := newRawImage(t, 0, layer)
		layoutDir := t.TempDir()
		writeRawLayout(t, layoutDir, raw)
		if err := os.Truncate(filepath.Join(layoutDir, "blobs", "sha256", sha256Hash(raw.config).Hex), 100_000_000); err != nil {
			t.Fatal(err) // sparse: it takes no disk
		}
		loadRefused(t, layoutDir, "config sha256:", ": 100000000 bytes, limit 4194304")
	})

	t.Run("config of 5 MiB in a docker archive", func(t *testing.T) {
		raw := newRawImage(t, 0, layer)
		var cf map[string]any
		json.Unmarshal(raw.config, &cf)
		cf["padding"] = strings.Repeat(" ", 5<<20)
		raw.config, _ = json.Marshal(cf)
		archive := filepath.Join(t.TempDir(), "docker.tar")
		writeRawArchive(t, archive, raw)
		loadRefused(t, archive, "config config.json: ", "limit 4194304")
	})

	t.Run("manifest and index.json of 5 MiB in a layout", func(t *testing.T) {
		raw := newRawImage(t, 0, layer)
		layoutDir := t.TempDir()
		writeRawLayout(t, layoutDir, raw)
		mf := filepath.Join(layoutDir, "blobs", "sha256", raw.digest().Hex)
		os.Truncate(mf, 5<<20)
		s, dir := openStore(t)
		before := snapshot(t, dir)
		_, err := s.Load(ctx, layoutDir)
		refused(t, err, errdefs.ErrLimit, dir, before, "manifest "+raw.digest().String()+": 5242880 bytes, limit 4194304")
		os.Truncate(filepath.Join(layoutDir, "index.json"), 5<<20)
		_, err = s.Load(ctx, layoutDir)
		refused(t, err, errdefs.ErrLimit, dir, before, "index.json: 5242880 bytes, limit 4194304")
		os.Remove(filepath.Join(layoutDir, "index.json"))
		os.Symlink("/dev/zero", filepath.Join(layoutDir, "index.json"))
		_, err = s.Load(ctx, layoutDir)
		refused(t, err, errdefs.ErrInvalidArgument, dir, before, "index.json is not a regular file")
	})

	t.Run("manifest of a registry", func(t *testing.T) {
		for _, sized := range []bool{false, true} {
			reg := newRegistry(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !strings.Contains(r.URL.Path, "/manifests/") {
						h.ServeHTTP(w, r)
						return
					}
					w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
					if sized {
						w.Header().Set("Content-Length", "104857600")
					}
					w.Write([]byte(`{"schemaVersion":2,"annotations":{"x":"`))
					for i := 0; i < 100 && r.Context().Err() == nil; i++ { // up to 100 MiB, unless the client goes
						if _, err := w.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
							return
						}
					}
				})
			})
			s, dir := openStore(t)
			before := snapshot(t, dir)
			_, err := s.Pull(ctx, reg.host+"/huge:1", WithInsecure(reg.host))
			want := "more than 4194304 bytes"
			if sized {
				want = "104857600 bytes, limit 4194304"
			}
			refused(t, err, errdefs.ErrLimit, dir, before, "GET http://"+reg.host+"/v2/huge/manifests/1: "+want)
		}
	})

	t.Run("smaller limits", func(t *testing.T) {
		raw := newRawImage(t, 0, layer)
		reg := newRegistry(t, nil)
		r, _ := name.ParseReference(reg.host+"/small:1", name.Insecure)
		remote.Write(r, raw.image(t), remote.WithTransport(reg.Client().Transport))
		s, err := Open(t.TempDir(), WithLimits(Limits{MaxManifestBytes: 100}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pull(ctx, reg.host+"/small:1", WithInsecure(reg.host)); !errors.Is(err, errdefs.ErrLimit) {
			t.Errorf("manifest over 100 bytes: %v", err)
		}
		s, _ = Open(t.TempDir(), WithLimits(Limits{MaxConfigBytes: 100}))
		if _, err := s.Pull(ctx, reg.host+"/small:1", WithInsecure(reg.host)); !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "limit 100") {
			t.Errorf("config over 100 bytes: %v", err)
		}
		if l := s.Limits(); l.MaxConfigBytes != 100 || l.MaxManifestBytes != DefaultLimits.MaxManifestBytes {
			t.Errorf("limits: %+v", l)
		}
		s, _ = Open(t.TempDir())
		if _, err := s.Pull(ctx, reg.host+"/small:1", WithInsecure(reg.host)); err != nil {
			t.Errorf("default limits: %v", err)
		}
	})
}

// Rootfs reads layers through the same limits: a store with smaller limits
// than the one that loaded an image refuses to convert it, and writes nothing.
func TestLimitsRootfs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := func(raw *rawImage) Image {
		layoutDir := t.TempDir()
		writeRawLayout(t, layoutDir, raw)
		imgs, err := s.Load(ctx, layoutDir)
		if err != nil {
			t.Fatal(err)
		}
		return imgs[0]
	}
	one := newRawImage(t, 0, gzipped(t, func(w io.Writer) {
		tw := tar.NewWriter(w)
		tw.WriteHeader(&tar.Header{Name: "small", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		tw.Write([]byte("x"))
		tw.WriteHeader(&tar.Header{Name: "dir/f0", Typeflag: tar.TypeReg, Mode: 0o644, Size: 100 << 20})
		zeros(tw, 100<<20)
		tw.Close()
	}))
	img := load(one)
	two := newRawImage(t, 0, zeroFiles(t, 1, 3<<20, 0), zeroFiles(t, 2, 3<<19, 0))
	img2 := load(two)
	before := snapshot(t, dir)
	for _, c := range []struct {
		limits Limits
		want   string
	}{
		{Limits{MaxFileBytes: 64 << 20}, "file dir/f0: 104857600 bytes, limit 67108864"},
		{Limits{MaxLayerBytes: 64 << 20}, "bytes uncompressed, limit 67108864"},
		{Limits{MaxEntries: 2}, "3 entries (with the directories they imply), limit 2"},
	} {
		small, err := Open(dir, WithLimits(c.limits))
		if err != nil {
			t.Fatal(err)
		}
		_, err = small.Rootfs(ctx, img)
		refused(t, err, errdefs.ErrLimit, dir, before, "image rootfs", "image "+one.digest().String()+": layer sha256:", c.want)
	}
	// The image limit counts the layers converted: the first converts, the second is refused.
	small, _ := Open(dir, WithLimits(Limits{MaxImageBytes: 5 << 20}))
	_, err = small.Rootfs(ctx, img2)
	if !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "image: ") || !strings.Contains(err.Error(), "limit 5242880") {
		t.Errorf("image limit: %v", err)
	}
	ext4s, _ := filepath.Glob(filepath.Join(dir, "layers", "*.ext4*"))
	if len(ext4s) != 1 || !strings.HasSuffix(ext4s[0], strings.TrimPrefix(img2.Layers[0].DiffID, "sha256:")+layerSuffix) {
		t.Errorf("layers: %v", ext4s)
	}
	// With the limits that loaded them, both convert.
	if _, err := s.Rootfs(ctx, img); err != nil {
		t.Error(err)
	}
	if _, err := s.Rootfs(ctx, img2); err != nil {
		t.Error(err)
	}
}

// Entry names, link targets and device nodes stay inside the ext4 image:
// conversion writes no host path but its own output file.
func TestLayerNamesStayInTheImage(t *testing.T) {
	ctx := context.Background()
	token := fmt.Sprintf("boxlite-escape-%d", os.Getpid())
	hostDir := t.TempDir() // where a ../ or absolute name would land if it were a host path
	rel, _ := filepath.Rel("/", hostDir)
	layer := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			if h.Mode == 0 {
				h.Mode = 0o644
			}
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	dotdot := strings.Repeat("../", 20) + rel + "/" + token + "-dotdot"
	abs := hostDir + "/" + token + "-abs"
	s, dir := openStore(t)
	img := loadImage(t, s, "names:1", testImage(t, v1.Config{}, layer(
		&tar.Header{Name: dotdot, Typeflag: tar.TypeReg, Size: 3},
		&tar.Header{Name: abs, Typeflag: tar.TypeReg, Size: 3},
		&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("../", 20) + rel},
		&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		&tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 0},
		&tar.Header{Name: "fifo", Typeflag: tar.TypeFifo},
		&tar.Header{Name: "dir", Typeflag: tar.TypeDir, Mode: 0o755, Size: gib100}, // a size a directory must not pass on
	)))
	paths, err := s.Rootfs(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if haveTools(t) {
		fsck(t, paths[0])
		if ls := debugfs(t, paths[0], "ls -l /"+rel); !strings.Contains(ls, token+"-dotdot") || !strings.Contains(ls, token+"-abs") {
			t.Errorf("names not under the image's root:\n%s", ls)
		}
		for _, p := range []string{"/null", "/sda"} { // device nodes are dropped (devices_test.go)
			if st := debugfs(t, paths[0], "stat "+p); !strings.Contains(st, "File not found") {
				t.Errorf("%s:\n%s", p, st)
			}
		}
	}

	// Through a symlink, and a hard link to a host file: refused, nothing written.
	for _, l := range [][]byte{
		layer(&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: hostDir},
			&tar.Header{Name: "up/" + token + "-through", Typeflag: tar.TypeReg, Size: 3}),
		layer(&tar.Header{Name: token + "-link", Typeflag: tar.TypeLink, Linkname: hostDir + "/" + token + "-target"}),
	} {
		os.WriteFile(filepath.Join(hostDir, token+"-target"), []byte("host"), 0o644)
		img := loadImage(t, s, "names:2", testImage(t, v1.Config{}, l))
		before := snapshot(t, dir)
		if _, err := s.Rootfs(ctx, img); err == nil {
			t.Error("converted")
		} else {
			t.Log(err)
		}
		if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
			t.Errorf("store changed:\n%v\n%v", before, after)
		}
	}
	entries, _ := os.ReadDir(hostDir)
	if len(entries) != 1 || entries[0].Name() != token+"-target" {
		t.Errorf("host directory holds %v", entries)
	}
	if fi, _ := os.Stat(filepath.Join(hostDir, token+"-target")); fi == nil || fi.Size() != 4 {
		t.Errorf("host file changed: %v", fi)
	}
}
