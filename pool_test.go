package boxlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// These tests need no VM: pool options, shapes, and hidden pool records.
// A hand-over itself is tested with real boxes (tests/integration/pool_test.go).

func TestWarmPoolOptions(t *testing.T) {
	bad := []Option{
		WithWarmPool(0, "alpine:latest"),
		WithWarmPool(MaxWarmPoolSize+1, "alpine:latest"),
		WithWarmPool(1, "alpine:latest", WithPorts(Port{GuestPort: 80})),
		WithWarmPool(1, "alpine:latest", WithVolume("/tmp", "/mnt", false)),
		WithWarmPool(1, "alpine:latest", WithDetach()),
		WithWarmPool(1, "alpine:latest", WithName("x")),
		WithWarmPool(1, "alpine:latest", WithMemoryMiB(1)),
		WithWarmPoolMemoryMiB(0),
	}
	for i, opt := range bad {
		var o runtimeOptions
		if err := opt(&o); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("option %d: %v, want ErrInvalidArgument", i, err)
		}
	}
	var o runtimeOptions
	if err := WithWarmPool(3, "alpine:latest", WithMemoryMiB(128), WithCPUs(1))(&o); err != nil {
		t.Fatal(err)
	}
	if len(o.pools) != 1 || o.pools[0].size != 3 || o.pools[0].cfg.MemoryMiB != 128 {
		t.Fatalf("pools: %+v", o.pools)
	}
}

func TestPoolShapeKey(t *testing.T) {
	base := defaultBoxConfig("alpine:latest")
	key := shapeKey(base, "sha256:aa")
	same := base
	same.Name, same.Hostname, same.Env, same.AutoRemove, same.User = "n", "h", map[string]string{"A": "1"}, !base.AutoRemove, "u"
	if shapeKey(same, "sha256:aa") != key {
		t.Error("per-box settings changed the shape")
	}
	for i, mut := range []func(*BoxConfig){
		func(c *BoxConfig) { c.MemoryMiB++ },
		func(c *BoxConfig) { c.CPUs++ },
		func(c *BoxConfig) { c.DiskSizeGB++ },
		func(c *BoxConfig) { c.Network.Mode = NetworkDisabled },
		func(c *BoxConfig) { c.Network.AllowNet = []string{"example.com"} },
		func(c *BoxConfig) { c.KernelArgs = []string{"loglevel=7"} },
		func(c *BoxConfig) { c.Prestart = []string{PrestartPython} },
	} {
		c := base
		mut(&c)
		if shapeKey(c, "sha256:aa") == key {
			t.Errorf("change %d kept the shape", i)
		}
	}
	if shapeKey(base, "sha256:bb") == key {
		t.Error("another image kept the shape")
	}
	// A prestarted session's requests carry the env: it is the shape's then.
	pre := base
	pre.Prestart = []string{PrestartPython}
	env := pre
	env.Env = map[string]string{"A": "1"}
	if shapeKey(pre, "sha256:aa") == shapeKey(env, "sha256:aa") {
		t.Error("env of a prestarted shape did not change it")
	}
}

func TestPoolRecordsHidden(t *testing.T) {
	r := testRuntime(t)
	b := testBox(t, r)
	p, err := r.register(b.rec.Config, b.rec.ImageDigest, testPoolOwner)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	infos, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.ID == p.ID() {
			t.Errorf("List shows pool box %s", p.ID())
		}
	}
	if len(infos) != 1 || infos[0].ID != b.ID() {
		t.Errorf("List: %+v, want box %s alone", infos, b.ID())
	}
	if _, err := r.Get(ctx, p.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get of a pool box: %v, want ErrNotFound", err)
	}
	// Its image is in use all the same, as the only box left.
	if err := b.Remove(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PruneImages(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Images().Get(p.rec.ImageDigest); err != nil {
		t.Errorf("prune removed a pool box's image: %v", err)
	}
}

// A pool whose boxes cannot start (no shim in its assets) says why from
// WaitWarmPools, and leaves no box behind.
func TestWarmPoolStartFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	dir, digest := randomLayout(t, 1)
	r, err := NewRuntime(WithHome(home), WithAssets(t.TempDir()), WithWarmPool(1, digest, WithMemoryMiB(128)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Images().Load(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitWarmPools(ctx); err == nil || errors.Is(err, errdefs.ErrTimeout) {
		t.Fatalf("WaitWarmPools with no shim: %v, want the start's error", err)
	}
	if st := r.WarmPools(); len(st) != 1 || st[0].Ready != 0 || st[0].Starting != 0 {
		t.Fatalf("pools: %+v", st)
	}
	ents, _ := os.ReadDir(filepath.Join(home, "boxes"))
	if len(ents) != 0 {
		t.Fatalf("a failed pool start left %d box directories", len(ents))
	}
}
