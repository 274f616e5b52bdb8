package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// startRegistry serves an in-process registry on 127.0.0.1 for the test
// and returns its host:port.
func startRegistry(tb testing.TB) string {
	tb.Helper()
	srv := boxtest.NewRegistry()
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushTestImage pushes the busybox test image to host/repoTag and returns its digest.
func pushTestImage(tb testing.TB, host, repoTag string) string {
	tb.Helper()
	d, err := boxtest.PushImage(os.Getenv("BOXLITE_TEST_IMAGE"), host, repoTag)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// storeFiles lists the files of the runtime's image store with their sizes
// (locks aside), to see that a failed pull leaves nothing behind.
func storeFiles(t *testing.T, r *boxlite.Runtime) []string {
	t.Helper()
	dir := filepath.Join(r.Home(), "images")
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); !fi.IsDir() && !strings.HasSuffix(p, "lock") {
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

// TestRegistryRunByNameThroughMirror boots a box from an image that only a
// mirror of docker.io has, by the name programs use.
func TestRegistryRunByNameThroughMirror(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	host := startRegistry(t)
	digest := pushTestImage(t, host, "library/mirrored:1")
	r, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithRegistryMirrors("docker.io=http://"+host))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Images().Get("mirrored:1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("mirrored:1 is in the store before the test: %v", err)
	}

	start := time.Now()
	box, err := boxtest.CreateStarted(ctx, r, "mirrored:1") // not in the store: pulled through the mirror
	if err != nil {
		t.Fatal(err)
	}
	defer box.Remove(context.Background(), true)
	res := runIn(t, box, sh("echo hello from a pulled image; id -u box"))
	t.Logf("create to first exec, image pulled from the in-process registry: %v", time.Since(start))
	if string(res.Stdout) != "hello from a pulled image\n1000\n" || res.Code != 0 {
		t.Fatalf("got %q (stderr %q) code %d", res.Stdout, res.Stderr, res.Code)
	}
	img, err := r.Images().Get("docker.io/library/mirrored:1")
	if err != nil || img.Digest != digest || box.Info().Image != "mirrored:1" {
		t.Fatalf("stored image %+v (%v), want digest %s; box image %q", img, err, digest, box.Info().Image)
	}
}

// TestRegistryPullByDigestAndErrors pulls by digest, directly and through a
// mirror, and checks that a missing image, a wrong digest and a malformed
// reference fail with their kind and leave the store as it was. No boot.
func TestRegistryPullByDigestAndErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host := startRegistry(t)
	digest := pushTestImage(t, host, "library/app:1")
	// Explicitly no mirrors (whatever the environment says), the registry allowed over plain HTTP.
	direct, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithInsecureRegistries(host), boxlite.WithRegistryMirrors())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	byDigest := host + "/library/app@" + digest
	res, err := direct.Pull(ctx, byDigest)
	if err != nil || res.Digest != digest || res.Name != byDigest || res.Source != host {
		t.Fatalf("pull by digest: %+v, %v", res, err)
	}
	if img, err := direct.Images().Get(byDigest); err != nil || img.Digest != digest {
		t.Fatalf("Get(%s): %+v, %v", byDigest, img, err)
	}
	mirrored, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithRegistryMirrors("docker.io=http://"+host))
	if err != nil {
		t.Fatal(err)
	}
	defer mirrored.Close()
	res, err = mirrored.Pull(ctx, "app@"+digest)
	if err != nil || res.Name != "docker.io/library/app@"+digest || res.Source != "http://"+host || res.Downloaded != 0 {
		t.Fatalf("pull by digest through a mirror: %+v, %v", res, err)
	}

	// Not allowed over plain HTTP unless asked.
	strict, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithInsecureRegistries(), boxlite.WithRegistryMirrors())
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()

	wrong := "sha256:" + strings.Repeat("0", 64)
	boxes, _ := direct.List(ctx)
	for _, c := range []struct {
		rt   *boxlite.Runtime
		ref  string
		kind error
		msg  string
	}{
		{direct, host + "/library/missing:1", errdefs.ErrNotFound, "missing"},
		{direct, host + "/library/app:2", errdefs.ErrNotFound, "app:2"},
		{direct, host + "/library/app@" + wrong, errdefs.ErrNotFound, wrong},
		{direct, "Not A Ref", errdefs.ErrInvalidArgument, "Not A Ref"},
		{direct, "127.0.0.1:9/library/app:1", errdefs.ErrUnreachable, "connection refused"},
		{strict, host + "/library/app:1", errdefs.ErrInvalidArgument, "plain HTTP"},
	} {
		before := storeFiles(t, direct)
		_, err := c.rt.Pull(ctx, c.ref)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Pull(%q) = %v, want %v naming %q", c.ref, err, c.kind, c.msg)
		}
		// Create pulls what the store lacks, and fails the same way, registering no box.
		_, err = boxtest.CreateStarted(ctx, c.rt, c.ref)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Create(%q) = %v, want %v", c.ref, err, c.kind)
		}
		if after := storeFiles(t, direct); !reflect.DeepEqual(before, after) {
			t.Errorf("Pull(%q) changed the store:\n%v\n%v", c.ref, before, after)
		}
	}
	if after, _ := direct.List(ctx); len(after) != len(boxes) {
		t.Errorf("failed creates left boxes: %d, then %d", len(boxes), len(after))
	}
}

// BenchmarkCreateToFirstExec times a box's creation to its first exec's
// result when the image is in the store (pulled and converted before) and
// when it is not (pulled from the in-process registry through a mirror, its
// layer converted to ext4, in a fresh home), and the pull and conversion
// alone. Run it with: go test ./tests/integration/ -run XXX -bench Create -benchtime 3x
func BenchmarkCreateToFirstExec(b *testing.B) {
	host := startRegistry(b)
	pushTestImage(b, host, "library/bench:1")
	ctx := context.Background()
	newRuntime := func(b *testing.B, home string) *boxlite.Runtime {
		r, err := boxlite.NewRuntime(boxlite.WithHome(home), boxlite.WithRegistryMirrors("docker.io=http://"+host))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	firstExec := func(b *testing.B, r *boxlite.Runtime) {
		box, err := boxtest.CreateStarted(ctx, r, "bench:1")
		if err != nil {
			b.Fatal(err)
		}
		if res, err := box.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil || res.Code != 0 {
			b.Fatal(res, err)
		}
		b.StopTimer()
		box.Remove(ctx, true)
		b.StartTimer()
	}

	pullConvert := func(b *testing.B, r *boxlite.Runtime) {
		res, err := r.Pull(ctx, "bench:1")
		if err == nil {
			_, err = r.Images().Rootfs(ctx, res.Image)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	// eachInFreshHome times f over a new runtime in a fresh home, b.N times.
	eachInFreshHome := func(b *testing.B, f func(*testing.B, *boxlite.Runtime)) {
		for range b.N {
			b.StopTimer()
			r := newRuntime(b, b.TempDir())
			b.StartTimer()
			f(b, r)
			b.StopTimer()
			r.Close()
			b.StartTimer()
		}
	}

	b.Run("pull+convert", func(b *testing.B) { eachInFreshHome(b, pullConvert) })
	b.Run("not-cached", func(b *testing.B) { eachInFreshHome(b, firstExec) })
	b.Run("cached", func(b *testing.B) {
		b.StopTimer()
		r := newRuntime(b, b.TempDir())
		defer r.Close()
		pullConvert(b, r)
		b.StartTimer()
		for range b.N {
			firstExec(b, r)
		}
	})
}
