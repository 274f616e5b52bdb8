package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/boxlite/boxlite/errdefs"
)

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// needs lists the blobs that img needs, then (with ext4) its ext4 layers.
func needs(t *testing.T, s *Store, img Image, ext4 bool) []string {
	t.Helper()
	h, _ := v1.NewHash(img.Digest)
	m, _, err := s.manifestAndConfig(h)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"oci/blobs/sha256/" + h.Hex, "oci/blobs/sha256/" + m.Config.Digest.Hex}
	for _, l := range m.Layers {
		out = append(out, "oci/blobs/sha256/"+l.Digest.Hex)
	}
	for _, l := range img.Layers {
		if ext4 {
			out = append(out, "layers/"+strings.TrimPrefix(l.DiffID, "sha256:")+layerSuffix)
		}
	}
	return out
}

func exist(dir string, paths []string) error {
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	return nil
}

func TestGCKeepsInUseAndRemovesTheRest(t *testing.T) {
	ctx := context.Background()
	s, dir := openStore(t)
	shared := layerTar(t, entry{name: "bin/", typ: tar.TypeDir}, entry{name: "bin/sh", body: "shared"})
	a := loadImage(t, s, "a:1", testImage(t, v1.Config{}, shared, layerTar(t, entry{name: "a"})))
	b := loadImage(t, s, "b:1", testImage(t, v1.Config{}, shared, layerTar(t, entry{name: "b"})))
	for _, img := range []Image{a, b} {
		if _, err := s.Rootfs(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, dir)
	if res, err := s.GC(ctx, GCOptions{}); err != nil || !reflect.DeepEqual(res, GCResult{}) {
		t.Fatalf("GC of a store in use: %+v, %v", res, err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("GC removed what named images need:\n%v\n%v", before, after)
	}

	// A box uses a; its name goes: a stays whole, and the box could boot from it.
	if err := s.Remove("a:1"); err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx, GCOptions{InUse: []string{a.Digest}})
	if err != nil || res.Blobs != 0 || res.Layers != 0 {
		t.Fatalf("GC with a in use: %+v, %v", res, err)
	}
	if err := exist(dir, needs(t, s, a, true)); err != nil {
		t.Fatalf("in-use image lost a file: %v", err)
	}
	n := conversions.Load()
	if img, err := s.Get(a.Digest); err != nil {
		t.Fatal(err)
	} else if _, err := s.Rootfs(ctx, img); err != nil || conversions.Load() != n {
		t.Fatalf("Rootfs of the in-use image: %v, %d conversions", err, conversions.Load()-n)
	}

	// No box uses it any more: what only a needs goes, the shared layer stays.
	aNeeds := needs(t, s, a, true)
	res, err = s.GC(ctx, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 3 || res.Layers != 1 || res.Bytes <= 0 { // manifest, config, top layer; its ext4
		t.Errorf("GC: %+v", res)
	}
	if err := exist(dir, needs(t, s, b, true)); err != nil {
		t.Fatalf("b lost a file: %v", err)
	}
	for _, p := range aNeeds {
		_, err := os.Stat(filepath.Join(dir, p))
		if shared := strings.Contains(p, strings.TrimPrefix(b.Layers[0].DiffID, "sha256:")); shared != (err == nil) {
			t.Errorf("%s: %v (shared %v)", p, err, shared)
		}
	}
	if _, err := s.Get(a.Digest); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(a) after GC: %v", err)
	}
	if _, err := s.GC(ctx, GCOptions{InUse: []string{"sha256:nothex"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad in-use digest: %v", err)
	}
}

func TestGCUnnamedAndAll(t *testing.T) {
	ctx := context.Background()
	s, dir := openStore(t)
	named := loadImage(t, s, "named:1", simpleImage(t, "named"))
	layoutDir := filepath.Join(t.TempDir(), "layout")
	unnamed := simpleImage(t, "unnamed")
	writeLayout(t, layoutDir, unnamed, "latest") // a tag alone: loaded unnamed
	used := loadImage(t, s, "used:1", simpleImage(t, "used"))
	if _, err := s.Load(ctx, layoutDir); err != nil {
		t.Fatal(err)
	}
	if err := s.Tag(used.Digest, "used:2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("used:1"); err != nil {
		t.Fatal(err)
	}

	res, err := s.GC(ctx, GCOptions{InUse: []string{used.Digest}})
	if err != nil || !reflect.DeepEqual(res.Images, []string{digestOf(t, unnamed)}) || res.Blobs != 3 {
		t.Fatalf("GC: %+v, %v", res, err)
	}
	res, err = s.GC(ctx, GCOptions{InUse: []string{used.Digest}, All: true})
	if err != nil || !reflect.DeepEqual(res.Images, []string{"docker.io/library/named:1"}) || res.Blobs != 3 {
		t.Fatalf("GC all: %+v, %v", res, err)
	}
	if _, err := s.Get(named.Digest); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("named image after GC all: %v", err)
	}
	if img, err := s.Get("used:2"); err != nil || exist(dir, needs(t, s, img, false)) != nil {
		t.Errorf("in-use image after GC all: %v", err)
	}
	res, err = s.GC(ctx, GCOptions{All: true})
	if err != nil || len(files(t, filepath.Join(dir, "oci", "blobs", "sha256"))) != 0 {
		t.Fatalf("GC all, nothing in use: %+v, %v, left %v", res, err, files(t, filepath.Join(dir, "oci", "blobs", "sha256")))
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Errorf("images left: %+v", imgs)
	}
}

func TestGCLeftovers(t *testing.T) {
	ctx := context.Background()
	s, dir := openStore(t)
	img := loadImage(t, s, "app:1", simpleImage(t, "app"))
	if _, err := s.Rootfs(ctx, img); err != nil {
		t.Fatal(err)
	}
	hex := strings.TrimPrefix(img.Layers[0].DiffID, "sha256:")
	layers := filepath.Join(dir, "layers")

	// A crashed load, conversion and index rewrite; a live pull; a conversion under way.
	dead := filepath.Join(dir, "tmp", "load-dead")
	os.MkdirAll(filepath.Join(dead, "blobs", "sha256"), 0o755)
	os.WriteFile(filepath.Join(dead, "blobs", "sha256", "x"), []byte("x"), 0o644)
	live, done, err := s.newStage(ctx, "pull-")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	os.WriteFile(filepath.Join(layers, "."+hex+layerSuffix+".tmp-1"), []byte("x"), 0o644)
	// Layers converted by older rules (format 1 kept device nodes).
	os.WriteFile(filepath.Join(layers, hex+".ext4"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(layers, hex+".v1.ext4"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "oci", ".index.json.tmp-1"), []byte("x"), 0o644)
	busy := strings.Repeat("b", 64)
	unlock, err := lockFile(ctx, filepath.Join(layers, busy+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	os.WriteFile(filepath.Join(layers, "."+busy+layerSuffix+".tmp-2"), []byte("x"), 0o644)

	if _, err := s.GC(ctx, GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := files(t, filepath.Join(dir, "tmp")), []string{filepath.Base(live)}; !reflect.DeepEqual(got, want) {
		t.Errorf("tmp: %v, want %v", got, want)
	}
	want := []string{"." + busy + layerSuffix + ".tmp-2", busy + ".lock", hex + layerSuffix, hex + ".lock"}
	sort.Strings(want)
	if got := files(t, layers); !reflect.DeepEqual(got, want) {
		t.Errorf("layers: %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci", ".index.json.tmp-1")); err == nil {
		t.Error("index.json leftover kept")
	}
}

// TestGCConcurrentWithLoads runs GC while images load and get removed: every
// image in the index always has all it needs.
func TestGCConcurrentWithLoads(t *testing.T) {
	ctx := context.Background()
	s, dir := openStore(t)
	archives := make([]string, 4)
	for i := range archives {
		archives[i] = filepath.Join(t.TempDir(), "img.tar")
		ref := fmt.Sprintf("img%d:1", i)
		writeArchive(t, archives[i], map[string]v1.Image{ref: twoLayerImage(t, fmt.Sprint(i))})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.GC(ctx, GCOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for round := range 10 {
		for i, a := range archives {
			other, _ := Open(dir) // as another process would
			if _, err := other.Load(ctx, a); err != nil {
				t.Fatal(err)
			}
			imgs, err := s.List()
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range imgs {
				if err := exist(dir, needs(t, s, img, false)); err != nil { // blobs
					t.Fatalf("round %d: %s lost a blob: %v", round, img.Name, err)
				}
			}
			if (round+i)%2 == 0 {
				s.Remove(fmt.Sprintf("img%d:1", i))
			}
		}
	}
	close(stop)
	wg.Wait()
}
