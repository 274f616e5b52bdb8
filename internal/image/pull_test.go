package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/boxlite/boxlite/errdefs"
)

// testRegistry is go-containerregistry's in-process registry on 127.0.0.1,
// plain HTTP unless made with TLS, with the requests it served.
type testRegistry struct {
	*httptest.Server
	host     string
	requests atomic.Int64
	blobGets atomic.Int64 // downloads of blobs (layers and configs)
}

func newRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	return startRegistry(t, wrap, false)
}

func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler, tls bool) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobGets.Add(1)
		}
		h.ServeHTTP(w, req)
	})
	if tls {
		r.Server = httptest.NewTLSServer(counted)
	} else {
		r.Server = httptest.NewServer(counted)
	}
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(strings.TrimPrefix(r.URL, "http://"), "https://")
	return r
}

// push writes img to ref (on a test registry) and returns its digest.
func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(r.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	return digestOf(t, img)
}

func (r *testRegistry) pushIndex(t *testing.T, repoTag string, ii v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, ii, remote.WithTransport(r.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	d, err := ii.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// twoLayerImage has two layers of known content, for progress and sharing checks.
func twoLayerImage(t *testing.T, seed string) v1.Image {
	return testImage(t, v1.Config{Cmd: []string{"/bin/sh"}},
		layerTar(t, entry{name: "bin/", typ: tar.TypeDir}, entry{name: "bin/sh", body: strings.Repeat("sh ", 50000), mode: 0o755}),
		layerTar(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/" + seed, body: seed}))
}

func TestPullByTagAndDigest(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil)
	src := twoLayerImage(t, "a")
	digest := reg.push(t, "team/app:1", src)
	s, dir := openStore(t)

	res, err := s.Pull(ctx, reg.host+"/team/app:1", WithInsecure(reg.host))
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != reg.host+"/team/app:1" || res.Digest != digest || res.Source != reg.host || len(res.Layers) != 2 || len(res.Failed) != 0 {
		t.Fatalf("pull: %+v", res)
	}
	m, _ := src.Manifest()
	if res.Downloaded != m.Layers[0].Size+m.Layers[1].Size || res.Size != res.Downloaded {
		t.Errorf("downloaded %d bytes, image %d, want %d", res.Downloaded, res.Size, m.Layers[0].Size+m.Layers[1].Size)
	}
	if n := reg.blobGets.Load(); n != 3 {
		t.Errorf("%d blob downloads, want 3 (two layers, the config)", n)
	}
	if img, err := s.Get(reg.host + "/team/app:1"); err != nil || img.Digest != digest || !reflect.DeepEqual(img.Config.Cmd, []string{"/bin/sh"}) {
		t.Fatalf("Get: %+v, %v", img, err)
	}
	for _, l := range m.Layers {
		if _, err := os.Stat(filepath.Join(dir, "oci", "blobs", "sha256", l.Digest.Hex)); err != nil {
			t.Errorf("layer blob %s: %v", l.Digest, err) // stored compressed, as pulled
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("tmp not empty after pull: %v", entries)
	}
	paths, err := s.Rootfs(ctx, res.Image)
	if err != nil || len(paths) != 2 {
		t.Fatalf("Rootfs: %v %v", paths, err)
	}

	// Again: nothing is downloaded.
	before := snapshot(t, dir)
	res, err = s.Pull(ctx, reg.host+"/team/app:1", WithInsecure(reg.host))
	if err != nil || res.Downloaded != 0 || reg.blobGets.Load() != 4 {
		t.Fatalf("pull again: downloaded %d (%d blob downloads in all), %v", res.Downloaded, reg.blobGets.Load(), err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("pulling again changed the store:\n%v\n%v", before, after)
	}

	// By digest, from another repository: a name of its own, the same image.
	reg.push(t, "other/app:2", src)
	byDigest := reg.host + "/other/app@" + digest
	res, err = s.Pull(ctx, byDigest, WithInsecure(reg.host))
	if err != nil || res.Name != byDigest || res.Digest != digest || res.Downloaded != 0 {
		t.Fatalf("pull by digest: %+v, %v", res, err)
	}
	if img, err := s.Get(byDigest); err != nil || img.Digest != digest {
		t.Fatalf("Get(%s): %+v, %v", byDigest, img, err)
	}
	// A layer shared with another image is downloaded once.
	other := testImage(t, v1.Config{}, layerTar(t, entry{name: "bin/", typ: tar.TypeDir}, entry{name: "bin/sh", body: strings.Repeat("sh ", 50000), mode: 0o755}),
		layerTar(t, entry{name: "x"}))
	reg.push(t, "team/other:1", other)
	res, err = s.Pull(ctx, reg.host+"/team/other:1", WithInsecure(reg.host))
	om, _ := other.Manifest()
	if err != nil || res.Downloaded != om.Layers[1].Size {
		t.Fatalf("pull sharing a layer: downloaded %d, want %d: %v", res.Downloaded, om.Layers[1].Size, err)
	}
}

func TestPullPlatformFromIndex(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil)
	amd, arm := simpleImage(t, "amd"), simpleImage(t, "arm")
	ii := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	indexDigest := reg.pushIndex(t, "multi:1", ii)
	s, dir := openStore(t)

	res, err := s.Pull(ctx, reg.host+"/multi:1", WithInsecure(reg.host))
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != digestOf(t, amd) {
		t.Fatalf("pulled %s, want the amd64 image %s", res.Digest, digestOf(t, amd))
	}
	armLayers, _ := arm.Manifest()
	if _, err := os.Stat(filepath.Join(dir, "oci", "blobs", "sha256", armLayers.Layers[0].Digest.Hex)); err == nil {
		t.Error("the arm64 layer was downloaded")
	}
	// By the index digest: found later without the registry, under that digest.
	byIndex := reg.host + "/multi@" + indexDigest
	if _, err := s.Pull(ctx, byIndex, WithInsecure(reg.host)); err != nil {
		t.Fatal(err)
	}
	reg.Close()
	if img, err := s.Get(byIndex); err != nil || img.Digest != digestOf(t, amd) {
		t.Fatalf("Get(%s) = %+v, %v", byIndex, img, err)
	}

	// No linux/amd64 in the index: not found, and nothing written.
	reg = newRegistry(t, nil)
	reg.pushIndex(t, "armonly:1", mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}}))
	before := snapshot(t, dir)
	_, err = s.Pull(ctx, reg.host+"/armonly:1", WithInsecure(reg.host))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "no linux/amd64 image") {
		t.Fatalf("arm-only index: %v", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed pull changed the store:\n%v\n%v", before, after)
	}

	// A single image for another architecture: refused, as the guest could not run it.
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	armOnly, err := mutate.ConfigFile(arm, cf)
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, "arm:1", armOnly)
	if _, err = s.Pull(ctx, reg.host+"/arm:1", WithInsecure(reg.host)); !errors.Is(err, errdefs.ErrUnsupported) || !strings.Contains(err.Error(), "linux/arm64") {
		t.Fatalf("arm64 image: %v", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed pull changed the store:\n%v\n%v", before, after)
	}
}

func TestPullMirrorFallback(t *testing.T) {
	ctx := context.Background()
	upstream := newRegistry(t, nil)
	digest := upstream.push(t, "library/app:1", simpleImage(t, "up"))
	down := newRegistry(t, nil)
	down.Close() // refuses connections
	empty404 := newRegistry(t, nil)
	s, _ := openStore(t)

	mirrors := Mirrors{upstream.host: {"http://" + down.host, "http://" + empty404.host}}
	res, err := s.Pull(ctx, upstream.host+"/library/app:1", WithMirrors(mirrors), WithInsecure(upstream.host))
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != upstream.host || res.Digest != digest || len(res.Failed) != 2 {
		t.Fatalf("source %q digest %s failed %v", res.Source, res.Digest, res.Failed)
	}
	if !strings.Contains(res.Failed[0].Error(), down.host) || !errors.Is(res.Failed[1], errdefs.ErrNotFound) {
		t.Errorf("mirror errors: %v", res.Failed)
	}
	if empty404.requests.Load() == 0 {
		t.Error("the second mirror was not asked")
	}

	// A mirror that has it serves it (under a path prefix), and the registry is not asked.
	mirror := newRegistry(t, nil)
	mirror.push(t, "cache/library/app:1", simpleImage(t, "up"))
	upstream.requests.Store(0)
	s2, _ := openStore(t)
	url := "http://" + mirror.host + "/cache/"
	res, err = s2.Pull(ctx, upstream.host+"/library/app:1", WithMirrors(Mirrors{upstream.host: {"http://" + empty404.host, url}}))
	if err != nil || res.Source != url || res.Digest != digest || res.Name != upstream.host+"/library/app:1" {
		t.Fatalf("pull through mirror: %+v, %v", res, err)
	}
	if n := upstream.requests.Load(); n != 0 {
		t.Errorf("the registry got %d requests", n)
	}
	// The mirror's host is insecure only as a mirror: pulled directly, it needs asking.
	if _, err := s2.Pull(ctx, mirror.host+"/cache/library/app:1"); err == nil {
		t.Error("plain HTTP to a mirror's host was allowed for a direct pull")
	}

	// All sources fail: the registry's error kind, and each mirror's reason.
	_, err = s.Pull(ctx, upstream.host+"/library/missing:1", WithMirrors(mirrors), WithInsecure(upstream.host))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), down.host) || !strings.Contains(err.Error(), empty404.host) {
		t.Fatalf("all sources fail: %v", err)
	}
}

func TestPullAuth(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	img := simpleImage(t, "secret")
	ref, _ := name.ParseReference(reg.host+"/private/app:1", name.Insecure)
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	s, dir := openStore(t)

	t.Setenv("DOCKER_CONFIG", t.TempDir()) // an empty docker config: no credentials
	before := snapshot(t, dir)
	_, err := s.Pull(ctx, reg.host+"/private/app:1", WithInsecure(reg.host))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("without credentials: %v", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed pull changed the store:\n%v\n%v", before, after)
	}

	cfg := t.TempDir()
	// "YWxpY2U6czNjcmV0" is base64("alice:s3cret"), as `docker login` writes it.
	conf := fmt.Sprintf(`{"auths":{%q:{"auth":"YWxpY2U6czNjcmV0"}}}`, reg.host)
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	res, err := s.Pull(ctx, reg.host+"/private/app:1", WithInsecure(reg.host))
	if err != nil || res.Digest != digestOf(t, img) {
		t.Fatalf("with docker config credentials: %+v, %v", res, err)
	}
}

func TestPullProgress(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil)
	src := twoLayerImage(t, "p")
	reg.push(t, "app:1", src)
	m, _ := src.Manifest()
	s, _ := openStore(t)

	var mu sync.Mutex
	var events []Progress
	var tr Tracker
	res, err := s.Pull(ctx, reg.host+"/app:1", WithInsecure(reg.host), WithProgress(func(p Progress) {
		mu.Lock()
		events = append(events, p)
		mu.Unlock()
		tr.Update(p)
	}))
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]Progress{}
	for i, p := range events {
		if p.Ref != reg.host+"/app:1" || p.Source != reg.host || p.Cached {
			t.Fatalf("event %+v", p)
		}
		if i < 2 && p.Done != 0 { // every layer is announced before any byte
			t.Fatalf("event %d: %+v", i, p)
		}
		if prev, ok := last[p.Layer]; ok && p.Done < prev.Done {
			t.Fatalf("progress went back: %+v after %+v", p, prev)
		}
		last[p.Layer] = p
	}
	var sum int64
	for _, l := range m.Layers {
		p := last[l.Digest.String()]
		if p.Done != l.Size || p.Total != l.Size {
			t.Errorf("layer %s: last event %+v, size %d", l.Digest, p, l.Size)
		}
		sum += p.Done
	}
	layers, done, total := tr.Snapshot()
	if len(layers) != 2 || done != sum || total != sum || sum != res.Downloaded {
		t.Errorf("tracker: %d layers, %d/%d bytes; downloaded %d, events sum %d", len(layers), done, total, res.Downloaded, sum)
	}
	if len(events) < 4 {
		t.Errorf("only %d events", len(events))
	}

	// Again: each layer reported once, cached, complete.
	events = nil
	if _, err := s.Pull(ctx, reg.host+"/app:1", WithInsecure(reg.host), WithProgress(func(p Progress) { events = append(events, p) })); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || !events[0].Cached || events[0].Done != events[0].Total || !events[1].Cached {
		t.Errorf("cached pull events: %+v", events)
	}
}

func TestPullInsecureOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			reg := startRegistry(t, nil, tls)
			img := simpleImage(t, "i")
			reg.push(t, "app:1", img)
			s, dir := openStore(t)
			before := snapshot(t, dir)
			_, err := s.Pull(ctx, reg.host+"/app:1")
			if err == nil {
				t.Fatal("pulled from an insecure registry without being asked")
			}
			if !tls && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "plain HTTP")) {
				t.Errorf("error does not say why: %v", err)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
				t.Errorf("a failed pull changed the store:\n%v\n%v", before, after)
			}
			if _, err := s.Pull(ctx, reg.host+"/app:1", WithInsecure(reg.host)); err != nil {
				t.Fatalf("asked: %v", err)
			}
		})
	}
}

func TestPullErrors(t *testing.T) {
	ctx := context.Background()
	src := twoLayerImage(t, "e")
	m, _ := src.Manifest()
	bad := m.Layers[1].Digest
	var corrupt atomic.Bool
	reg := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if corrupt.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+bad.String()) {
				w.Header().Set("Content-Length", fmt.Sprint(m.Layers[1].Size))
				w.Write(make([]byte, m.Layers[1].Size)) // right size, wrong bytes
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	digest := reg.push(t, "app:1", src)
	s, dir := openStore(t)
	insecure := WithInsecure(reg.host)
	wrongDigest := "sha256:" + strings.Repeat("0", 64)

	for _, c := range []struct {
		ref  string
		kind error
		msg  string
	}{
		{"UPPER/case:1", errdefs.ErrInvalidArgument, "invalid"},
		{reg.host + "/app:bad tag", errdefs.ErrInvalidArgument, "invalid"},
		{digest, errdefs.ErrInvalidArgument, "names no repository"},
		{reg.host + "/missing:1", errdefs.ErrNotFound, "missing"},
		{reg.host + "/app:2", errdefs.ErrNotFound, "app:2"},
		{reg.host + "/app@" + wrongDigest, errdefs.ErrNotFound, wrongDigest},
	} {
		before := snapshot(t, dir)
		_, err := s.Pull(ctx, c.ref, insecure)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Pull(%q) = %v, want %v naming %q", c.ref, err, c.kind, c.msg)
		}
		if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
			t.Errorf("Pull(%q) changed the store:\n%v\n%v", c.ref, before, after)
		}
	}

	// Content that does not match its digest: the digest is named, nothing is kept.
	corrupt.Store(true)
	before := snapshot(t, dir)
	_, err := s.Pull(ctx, reg.host+"/app:1", insecure)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), bad.String()) {
		t.Fatalf("corrupt blob: %v", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a corrupt pull changed the store:\n%v\n%v", before, after)
	}
}

func TestPullCancelled(t *testing.T) {
	src := twoLayerImage(t, "c")
	m, _ := src.Manifest()
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	reg := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+m.Layers[0].Digest.String()) {
				w.Header().Set("Content-Length", fmt.Sprint(m.Layers[0].Size))
				w.Write([]byte{0x1f}) // a first byte, then stall
				w.(http.Flusher).Flush()
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	defer close(release)
	reg.push(t, "app:1", src)
	s, dir := openStore(t)
	before := snapshot(t, dir)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	start := time.Now()
	_, err := s.Pull(ctx, reg.host+"/app:1", WithInsecure(reg.host))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a cancelled pull changed the store:\n%v\n%v", before, after)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("tmp not empty: %v", entries)
	}
}

func TestParseMirrors(t *testing.T) {
	m, err := ParseMirrors(" docker.io=http://127.0.0.1:5000 ,ghcr.io=https://m.example, docker.io=mirror.example/hub")
	if err != nil {
		t.Fatal(err)
	}
	want := Mirrors{"docker.io": {"http://127.0.0.1:5000", "mirror.example/hub"}, "ghcr.io": {"https://m.example"}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %v", m)
	}
	r, _ := m.resolve()
	hub := r[name.DefaultRegistry]
	if len(hub) != 2 || !hub[0].plain || hub[1].plain || hub[1].prefix != "hub" || hub[1].reg.RegistryStr() != "mirror.example" {
		t.Errorf("docker.io mirrors: %+v", hub)
	}
	ref, _ := name.ParseReference("python:slim")
	if got := hub[1].ref(ref).String(); got != "mirror.example/hub/library/python:slim" {
		t.Errorf("ref on the mirror: %s", got)
	}
	for _, bad := range []string{"docker.io", "=http://x", "docker.io=ftp://x", "docker.io=http://", "docker.io=https://u:p@x", "bad registry=http://x"} {
		if _, err := ParseMirrors(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseMirrors(%q): %v", bad, err)
		}
	}
	if m, err := ParseMirrors(""); err != nil || len(m) != 0 {
		t.Errorf("empty: %v %v", m, err)
	}
}
