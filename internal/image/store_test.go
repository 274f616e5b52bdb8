package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/boxlite/boxlite/errdefs"
)

func TestLoadDockerArchive(t *testing.T) {
	s, dir := openStore(t)
	cfg := v1.Config{
		Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/w", User: "1000:1000",
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo hi"},
	}
	bottom := layerTar(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/motd", body: "hello\n"})
	top := layerTar(t, entry{name: "etc/.wh.motd"})
	src := testImage(t, cfg, bottom, top)
	archive := filepath.Join(t.TempDir(), "img.tar")
	writeArchive(t, archive, map[string]v1.Image{"alpine:latest": src, "example.com/team/app:1.0": src})

	loaded, err := s.Load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 {
		t.Fatalf("loaded %d images, want 2 (one per name): %+v", len(loaded), loaded)
	}
	digest := loaded[0].Digest
	got := map[string]bool{}
	for _, img := range loaded {
		got[img.Name] = true
		if img.Digest != digest {
			t.Errorf("%s: digest %s, want %s", img.Name, img.Digest, digest)
		}
	}
	if !got["docker.io/library/alpine:latest"] || !got["example.com/team/app:1.0"] {
		t.Errorf("names %v", got)
	}

	img := loaded[0]
	if !reflect.DeepEqual(img.Config, Config{Env: cfg.Env, WorkingDir: "/w", User: "1000:1000", Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd}) {
		t.Errorf("config %+v", img.Config)
	}
	want, err := src.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 2 || img.Layers[0].DiffID != want.RootFS.DiffIDs[0].String() || img.Layers[1].DiffID != want.RootFS.DiffIDs[1].String() {
		t.Errorf("layers %+v, want diff ids %v", img.Layers, want.RootFS.DiffIDs)
	}
	// Docker archive layers are stored uncompressed: the blob is the layer tar.
	if img.Layers[0].Size != int64(len(bottom)) || img.Size != int64(len(bottom)+len(top)) {
		t.Errorf("sizes %+v total %d, want %d+%d", img.Layers, img.Size, len(bottom), len(top))
	}
	blob, err := os.ReadFile(filepath.Join(dir, "oci", "blobs", "sha256", strings.TrimPrefix(img.Layers[0].DiffID, "sha256:")))
	if err != nil || !bytes.Equal(blob, bottom) {
		t.Errorf("bottom layer blob: %v", err)
	}

	hex := strings.TrimPrefix(digest, "sha256:")
	for _, ref := range []string{
		"alpine", "alpine:latest", "docker.io/library/alpine:latest", "index.docker.io/library/alpine",
		"library/alpine", "example.com/team/app:1.0", digest, "sha256:" + hex[:12], hex[:12], hex, "alpine@" + digest,
	} {
		img, err := s.Get(ref)
		if err != nil {
			t.Errorf("Get(%q): %v", ref, err)
			continue
		}
		if img.Digest != digest {
			t.Errorf("Get(%q) = %s, want %s", ref, img.Digest, digest)
		}
	}
	if img, _ := s.Get("alpine"); img.Name != "docker.io/library/alpine:latest" {
		t.Errorf("Get(alpine).Name = %q", img.Name)
	}

	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "docker.io/library/alpine:latest" || list[1].Name != "example.com/team/app:1.0" {
		t.Errorf("List = %+v", list)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("tmp not empty after load: %v", entries)
	}
}

func TestLoadDockerArchiveUncompressed(t *testing.T) {
	// docker save (before 25) writes uncompressed layers as <id>/layer.tar.
	// The stored image is the same as from a gzipped archive.
	s, _ := openStore(t)
	src := simpleImage(t, "x")
	tmp := t.TempDir()
	gz, plain := filepath.Join(tmp, "gz.tar"), filepath.Join(tmp, "plain.tar")
	writeArchive(t, gz, map[string]v1.Image{"x:1": src})
	writeArchive(t, plain, map[string]v1.Image{"x:1": src})
	uncompressArchive(t, plain)
	a, err := s.Load(context.Background(), gz)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Load(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("gzipped archive gave %+v, uncompressed %+v", a, b)
	}
}

// uncompressArchive rewrites a docker archive with gzipped layers as docker
// save does: uncompressed, as <name>/layer.tar.
func uncompressArchive(t *testing.T, path string) {
	t.Helper()
	renamed := map[string]string{}
	rewriteTar(t, path, func(h *tar.Header, body []byte) []byte {
		if name, ok := strings.CutSuffix(h.Name, ".tar.gz"); ok {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
			renamed[h.Name], h.Name = name+"/layer.tar", name+"/layer.tar"
		}
		if h.Name == "manifest.json" {
			for old, n := range renamed {
				body = bytes.ReplaceAll(body, []byte(`"`+old+`"`), []byte(`"`+n+`"`))
			}
		}
		return body
	})
}

func TestLoadOCILayout(t *testing.T) {
	s, _ := openStore(t)
	src := simpleImage(t, "app")
	other := simpleImage(t, "other")
	dir := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, dir, src, "example.com/app:1.0", "app:2") // full ref, short ref
	writeLayout(t, dir, other, "latest")                     // only a tag: loaded unnamed

	loaded, err := s.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range loaded {
		names = append(names, img.Name+" "+img.Digest)
	}
	want := []string{
		"example.com/app:1.0 " + digestOf(t, src), // OCI layouts keep their manifest digest
		"docker.io/library/app:2 " + digestOf(t, src),
		" " + digestOf(t, other),
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("loaded\n%q, want\n%q", names, want)
	}
	if img, err := s.Get(digestOf(t, other)); err != nil || img.Name != "" || img.Config.Cmd[0] != "/bin/other" {
		t.Errorf("unnamed image: %+v, %v", img, err)
	}
	if err := s.Tag(digestOf(t, other), "other"); err != nil {
		t.Fatal(err)
	}
	if img, err := s.Get("other:latest"); err != nil || img.Digest != digestOf(t, other) {
		t.Errorf("after Tag: %+v, %v", img, err)
	}

	// The same layout packed in a tar, as `docker save` (25+) or `tar -C dir -c .` writes it.
	archive := filepath.Join(t.TempDir(), "layout.tar")
	tarDir(t, dir, archive)
	s2, _ := openStore(t)
	loaded2, err := s2.Load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded2) != 3 || loaded2[0].Digest != digestOf(t, src) || loaded2[0].Name != "example.com/app:1.0" {
		t.Errorf("from tar: %+v", loaded2)
	}
}

func TestLoadIndexAnnotations(t *testing.T) {
	// docker save (25+) names images with io.containerd.image.name and puts only the tag in ref.name.
	s, _ := openStore(t)
	dir := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, dir, simpleImage(t, "x"), "latest")
	ixPath := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(ixPath)
	if err != nil {
		t.Fatal(err)
	}
	var ix v1.IndexManifest
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	ix.Manifests[0].Annotations[containerdAnnotation] = "docker.io/library/busybox:1.36"
	b, _ = json.Marshal(ix)
	if err := os.WriteFile(ixPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 || loaded[0].Name != "docker.io/library/busybox:1.36" {
		t.Errorf("loaded %+v", loaded)
	}
}

func TestLoadIdempotentAndMovesNames(t *testing.T) {
	s, dir := openStore(t)
	ctx := context.Background()
	a, b := simpleImage(t, "a"), simpleImage(t, "b")
	tmp := t.TempDir()
	archiveA, archiveB := filepath.Join(tmp, "a.tar"), filepath.Join(tmp, "b.tar")
	writeArchive(t, archiveA, map[string]v1.Image{"app:1": a, "app:stable": a})
	writeArchive(t, archiveB, map[string]v1.Image{"app:1": b})

	first, err := s.Load(ctx, archiveA)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	again, err := s.Load(ctx, archiveA)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, again) {
		t.Errorf("second load returned %+v, first %+v", again, first)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("second load changed the store:\n%v\n%v", before, after)
	}

	// app:1 moves to b; a keeps app:stable.
	if _, err := s.Load(ctx, archiveB); err != nil {
		t.Fatal(err)
	}
	if img, _ := s.Get("app:1"); img.Digest == first[0].Digest {
		t.Errorf("app:1 still points to the old image")
	}
	if img, err := s.Get("app:stable"); err != nil || img.Digest != first[0].Digest {
		t.Errorf("app:stable: %+v %v", img, err)
	}
	// Moving the last name leaves the old image unnamed, like docker's <none>.
	if _, err := s.Load(ctx, archiveB); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("app:stable"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(first[0].Digest[:19]); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("removing the last name should remove the image: %v", err)
	}
	if list, _ := s.List(); len(list) != 1 {
		t.Errorf("List after removing the last name: %+v", list)
	}
	// By its full digest, as boxes refer to it, it stays until GC.
	if img, err := s.Get(first[0].Digest); err != nil || img.Name != "" {
		t.Errorf("Get(full digest) after removing the last name: %+v, %v", img, err)
	}
	if _, err := s.GC(ctx, GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(first[0].Digest); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(full digest) after GC: %v", err)
	}
	writeArchive(t, archiveA, map[string]v1.Image{"app:1": a})
	if _, err := s.Load(ctx, archiveA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, archiveB); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "docker.io/library/app:1" || list[1].Name != "" || list[1].Digest != first[0].Digest {
		t.Errorf("List = %+v", list)
	}
}

func TestRemove(t *testing.T) {
	s, _ := openStore(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	img := simpleImage(t, "x")
	writeArchive(t, archive, map[string]v1.Image{"x:1": img, "x:2": img, "y:1": simpleImage(t, "y")})
	loaded, err := s.Load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("x:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("x:1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(x:1) after Remove: %v", err)
	}
	x2, err := s.Get("x:2")
	if err != nil {
		t.Fatal(err)
	}
	// By digest: the image and all its names go.
	if err := s.Remove(x2.Digest); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("x:2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(x:2) after Remove(digest): %v", err)
	}
	if list, _ := s.List(); len(list) != 1 || list[0].Name != "docker.io/library/y:1" {
		t.Errorf("List = %+v (loaded %+v)", list, loaded)
	}
	if err := s.Remove("x:1"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `"x:1"`) {
		t.Errorf("Remove missing: %v", err)
	}
}

func TestGetErrors(t *testing.T) {
	s, _ := openStore(t)
	for ref, kind := range map[string]error{
		"missing:latest":                     errdefs.ErrNotFound,
		"sha256:" + strings.Repeat("ab", 32): errdefs.ErrNotFound,
		"abcdef0123456789":                   errdefs.ErrNotFound, // a name, then a digest prefix
		"sha256:abc":                         errdefs.ErrInvalidArgument,
		"sha256:xyzxyzxyzxyz":                errdefs.ErrInvalidArgument,
		"Bad Name!":                          errdefs.ErrInvalidArgument,
	} {
		_, err := s.Get(ref)
		if !errors.Is(err, kind) || !strings.Contains(err.Error(), ref) {
			t.Errorf("Get(%q) = %v, want %v naming the ref", ref, err, kind)
		}
	}
	// An ambiguous prefix.
	ix := &v1.IndexManifest{Manifests: []v1.Descriptor{
		{Digest: v1.Hash{Algorithm: "sha256", Hex: "abcdef012345" + strings.Repeat("0", 52)}},
		{Digest: v1.Hash{Algorithm: "sha256", Hex: "abcdef012345" + strings.Repeat("1", 52)}},
	}}
	if _, err := lookup(ix, "abcdef012345"); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if i, err := lookup(ix, "abcdef0123450"); err != nil || len(i) != 1 || i[0] != 0 {
		t.Errorf("unique prefix: %v %v", i, err)
	}
}

func TestLoadBadInput(t *testing.T) {
	s, dir := openStore(t)
	ctx := context.Background()
	good := filepath.Join(t.TempDir(), "good.tar")
	writeArchive(t, good, map[string]v1.Image{"good:1": simpleImage(t, "good")})
	if _, err := s.Load(ctx, good); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	tmp := t.TempDir()

	garbage := filepath.Join(tmp, "garbage.tar")
	os.WriteFile(garbage, bytes.Repeat([]byte("not a tar "), 100), 0o644)
	_, err := s.Load(ctx, garbage)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != `image load "`+garbage+`": not an OCI layout or docker archive: invalid argument` {
		t.Errorf("garbage: %v", err)
	}
	if _, err := s.Load(ctx, filepath.Join(tmp, "missing.tar")); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "missing.tar") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := s.Load(ctx, tmp); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("directory that is no layout: %v", err)
	}
	empty := filepath.Join(tmp, "empty.tar")
	os.WriteFile(empty, nil, 0o644)
	if _, err := s.Load(ctx, empty); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("empty file: %v", err)
	}

	// A docker archive whose second layer does not match its diff id: the
	// first layer is fine and staged, but must not reach the store.
	img := testImage(t, v1.Config{}, layerTar(t, entry{name: "a", body: "a"}), layerTar(t, entry{name: "b", body: "b"}))
	bad := filepath.Join(tmp, "bad.tar")
	writeArchive(t, bad, map[string]v1.Image{"bad:1": img})
	rewriteTar(t, bad, func(h *tar.Header, body []byte) []byte {
		if strings.HasPrefix(h.Name, "sha256:") { // the config
			var cf v1.ConfigFile
			json.Unmarshal(body, &cf)
			cf.RootFS.DiffIDs[1] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
			body, _ = json.Marshal(cf)
		}
		return body
	})
	if _, err := s.Load(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("bad layer: %v", err)
	}

	// An OCI layout with a corrupt layer blob.
	layoutDir := filepath.Join(tmp, "layout")
	writeLayout(t, layoutDir, img, "corrupt:1")
	layers, _ := img.Layers()
	d, _ := layers[1].Digest()
	os.WriteFile(filepath.Join(layoutDir, "blobs", "sha256", d.Hex), []byte("corrupt"), 0o644)
	if _, err := s.Load(ctx, layoutDir); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("corrupt OCI blob: %v", err)
	}
	// The same, packed in a tar: caught while unpacking.
	tarDir(t, layoutDir, filepath.Join(tmp, "layout.tar"))
	if _, err := s.Load(ctx, filepath.Join(tmp, "layout.tar")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("corrupt OCI blob in tar: %v", err)
	}

	// A cancelled load.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Load(cctx, filepath.Join(tmp, "layout.tar")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("failed loads changed the store:\nbefore %v\nafter  %v", before, after)
	}
}

// rewriteTar rewrites the entries of the tar at path with fn.
func rewriteTar(t *testing.T, path string, fn func(h *tar.Header, body []byte) []byte) {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(in)), tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		body := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, body); err != nil {
			t.Fatal(err)
		}
		body = fn(h, body)
		h.Size = int64(len(body))
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStoreLayoutIsOCI(t *testing.T) {
	// The store is itself an OCI layout that go-containerregistry (and skopeo, ...) can read.
	s, dir := openStore(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	writeArchive(t, archive, map[string]v1.Image{"x:1": simpleImage(t, "x")})
	loaded, err := s.Load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := openStore(t)
	again, err := s2.Load(context.Background(), filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].Name != loaded[0].Name || again[0].Digest != loaded[0].Digest {
		t.Errorf("reloaded %+v, want %+v", again, loaded)
	}
}
