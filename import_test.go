package boxlite

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// An imported box is a new box: an archive whose config publishes ports on
// 0.0.0.0, opens the network, sets kernel arguments, a 28-year boot timeout,
// 64 GiB, 64 CPUs, a 1 TiB disk, detach and the auto-remove that is not the default imports with none
// of that (the importer's options, else Create's defaults), keeping only its
// content: image, env, entrypoint and cmd, user, working directory.
func TestImportIsANewBox(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	good := exportedBox(t, r)
	hostile := withManifest(t, readArchive(t, good), func(m map[string]any) {
		c := m["config"].(map[string]any)
		c["image"] = "registry.example/app:1"
		c["env"] = map[string]string{"MODE": "prod"}
		c["entrypoint"] = []string{"/app"}
		c["cmd"] = []string{"--serve"}
		c["user"] = "app"
		c["working_dir"] = "/srv"
		c["ports"] = []map[string]any{{"host_ip": "0.0.0.0", "host_port": 2222, "guest_port": 22}}
		c["network"] = map[string]any{"mode": "enabled", "allow_net": []string{"0.0.0.0/0"}}
		c["kernel_args"] = []string{"panic=0", "rdinit=/bin/sh"}
		c["boot_timeout"] = int64(28 * 365 * 24 * time.Hour)
		c["memory_mib"], c["cpus"], c["disk_size_gb"] = 64<<10, 64, 1024
		c["detach"], c["auto_remove"] = true, !abi.DefaultAutoRemove // both the opposite of the default
		c["hostname"], c["prestart"] = "evil", []string{"shell:/bin/evil"}
	})
	path := writeArchiveFile(t, hostile)

	r2 := testRuntime(t)
	c, err := r2.ImportBox(ctx, path, "plain")
	if err != nil {
		t.Fatal(err)
	}
	want := defaultBoxConfig("registry.example/app:1")
	want.Name = "plain"
	want.Env = map[string]string{"MODE": "prod"}
	want.Entrypoint, want.Cmd = []string{"/app"}, []string{"--serve"}
	want.User, want.WorkingDir = "app", "/srv"
	want.Network.Mode = NetworkEnabled
	if got := c.Info().Config; !reflect.DeepEqual(got, want) {
		t.Fatalf("imported config\n %+v\nwant\n %+v", got, want)
	}

	// The importer's options decide what the archive does not.
	c2, err := r2.ImportBox(ctx, path, "chosen", WithMemoryMiB(256), WithDetach(), WithBootTimeout(30*time.Second),
		WithNetwork(NetworkSpec{Mode: NetworkDisabled}), WithEnv("EXTRA", "1"))
	if err != nil {
		t.Fatal(err)
	}
	got := c2.Info().Config
	if got.MemoryMiB != 256 || !got.Detach || got.BootTimeout != 30*time.Second || got.Network.Mode != NetworkDisabled ||
		len(got.Ports) != 0 || got.Env["EXTRA"] != "1" || got.Env["MODE"] != "prod" {
		t.Fatalf("imported with options: %+v", got)
	}
	// Options the importer gets wrong are the importer's error, found before the archive is read.
	if _, err := r2.ImportBox(ctx, "/nonexistent.boxlite", "", WithBootTimeout(28*365*24*time.Hour)); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "import options") {
		t.Fatalf("bad import options: %v", err)
	}

	// A disk over the importer's disk size is refused, whatever the archive's config allows.
	huge := withManifest(t, hostile, func(m map[string]any) { m["disk"].(map[string]any)["size"] = int64(1) << 40 })
	if _, err := r2.ImportBox(ctx, writeArchiveFile(t, huge), ""); !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), "disk size") {
		t.Fatalf("1 TiB disk: %v", err)
	}
	assertNoStages(t, r2)
}

// No config, created or imported, makes a start wait for years, or takes
// the guest's first process away from the agent.
func TestBootTimeoutAndKernelArgsAreBounded(t *testing.T) {
	for _, c := range []struct {
		opt  BoxOption
		says string
	}{
		{WithBootTimeout(28 * 365 * 24 * time.Hour), "boot timeout"},
		{WithBootTimeout(MaxBootTimeout + time.Second), "boot timeout"},
		{WithKernelArgs("rdinit=/bin/sh"), "rdinit"},
		{WithKernelArgs("init=/bin/sh"), "init"},
		{WithKernelArgs(strings.Fields(strings.Repeat("quiet ", maxKernelArgWords+1))...), "kernel arguments"},
	} {
		cfg := defaultBoxConfig("alpine:latest")
		c.opt(&cfg)
		if err := cfg.validate(); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.says, err)
		}
	}
	cfg := defaultBoxConfig("alpine:latest")
	WithBootTimeout(MaxBootTimeout)(&cfg)
	WithKernelArgs("panic=0", "loglevel=7")(&cfg)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"alpine", "alpine:latest", "localhost:5000/a/b:1", "python@sha256:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("b", 64), "sha256:abc", strings.Repeat("c", 12)} {
		if err := validImageRef(ref); err != nil {
			t.Errorf("%q: %v", ref, err)
		}
	}
	for _, ref := range []string{"", "\x1b[2Jalpine", "alp\u009bine", "Alpine", "a b", "sha256:xyz", "alpine:" + strings.Repeat("t", 200), strings.Repeat("a", 600)} {
		if err := validImageRef(ref); err == nil {
			t.Errorf("%q: accepted", ref)
		}
	}
}
