package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/core"
)

// TestTemplates, in a home of its own: the first box of a shape makes its
// template, the next ones start from it (each its own machine: hostname,
// boot id, RNG, clock; all sharing the template's memory), a new agent or
// image makes a new template once, removing an image removes its
// templates, and a corrupt template makes a box boot and goes.
func TestTemplates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	home := t.TempDir()
	trt, err := core.NewRuntime(core.WithHome(home), core.WithTemplates(true))
	if err != nil {
		t.Fatal(err)
	}
	defer trt.Close()
	if _, err := trt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		t.Fatal(err)
	}
	// start creates a box, runs a command in it and checks how it started.
	start := func(rt *core.Runtime, image, want string, opts ...core.BoxOption) (*core.Box, string) {
		t.Helper()
		b, err := rt.Create(ctx, image, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(context.Background(), true) })
		res, err := b.Run(ctx, core.Command{Argv: []string{"sh", "-c",
			"hostname; cat /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; date +%s"}})
		if err != nil {
			t.Fatal(err)
		}
		info := b.Info().Runtime
		if info.Start != want {
			t.Fatalf("box %s (%s) started by %q (%s), want %q", b.ID(), image, info.Start, info.StartNote, want)
		}
		return b, string(res.Stdout)
	}

	_, first := start(trt, "alpine:latest", "new-template")
	b, outB := start(trt, "alpine:latest", "template", core.WithHostname("box-b"))
	c, outC := start(trt, "alpine:latest", "template", core.WithHostname("box-c"))
	// Each restored box has its own lane, at the template's drive.
	laneRoundTrip(ctx, t, b)
	laneRoundTrip(ctx, t, c)
	seen := map[string]string{}
	for _, o := range []struct {
		host, out string
	}{{core.DefaultHostname, first}, {"box-b", outB}, {"box-c", outC}} {
		f := strings.Fields(o.out)
		if len(f) != 4 {
			t.Fatalf("box said %q", o.out)
		}
		if f[0] != o.host {
			t.Errorf("hostname %q, want %s", f[0], o.host)
		}
		for i, what := range []string{"hostname", "boot id", "random bytes"} {
			if prev, dup := seen[f[i]]; dup {
				t.Errorf("two boxes read the same %s %q (%s)", what, f[i], prev)
			}
			seen[f[i]] = what
		}
		if at, _ := strconv.ParseInt(f[3], 10, 64); time.Since(time.Unix(at, 0)).Abs() > 30*time.Second {
			t.Errorf("box clock %s, host %d: not stepped to the host's", f[3], time.Now().Unix())
		}
	}
	// b and c map the same template memory.
	if mb, mc := templateMemfd(t, b), templateMemfd(t, c); mb == "" || mb != mc {
		t.Errorf("the boxes' VMMs map template memory %q and %q, want one memfd", mb, mc)
	}
	// A restored box is a whole box: disk writes persist over a restart.
	runIn(t, b, core.Command{Argv: []string{"sh", "-c", "echo kept > /root/f && sync"}})
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if info := b.Info().Runtime; info.Start != "boot" {
		t.Errorf("a restarted box started by %q, want boot (its disk is its own now)", info.Start)
	}
	if res := runIn(t, b, core.Command{Argv: []string{"cat", "/root/f"}}); string(res.Stdout) != "kept\n" {
		t.Errorf("after a restart /root/f = %q", res.Stdout)
	}

	// Another agent (here: its initramfs changed) makes a new template once.
	assets := t.TempDir()
	src := os.Getenv("BOXLITE_ASSETS")
	for _, f := range []string{"boxlite-shim", "guest/vmlinuz", "virtiofsd"} {
		os.MkdirAll(filepath.Join(assets, filepath.Dir(f)), 0o755)
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(assets, f)); err != nil {
			t.Fatal(err)
		}
	}
	initrd, err := os.ReadFile(filepath.Join(src, "guest", "initramfs.cpio"))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel skips zeros between and after archives.
	if err := os.WriteFile(filepath.Join(assets, "guest", "initramfs.cpio"), append(initrd, make([]byte, 512)...), 0o644); err != nil {
		t.Fatal(err)
	}
	rt2, err := core.NewRuntime(core.WithHome(home), core.WithAssets(assets), core.WithTemplates(true))
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	start(rt2, "alpine:latest", "new-template")
	start(rt2, "alpine:latest", "template")

	// Another image has templates of its own; removing it removes them.
	if _, err := trt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")); err != nil {
		t.Fatal(err)
	}
	start(trt, "python:slim", "new-template")
	start(trt, "python:slim", "template")
	dirs := templateDirs(t, home)
	if len(dirs) != 2 {
		t.Fatalf("template directories %q, want one per image", dirs)
	}
	if err := trt.RemoveImage("python:slim"); err != nil {
		t.Fatal(err)
	}
	if left := templateDirs(t, home); len(left) != 1 {
		t.Errorf("after removing python:slim, template directories %q, want alpine's only", left)
	}

	// A corrupt template: the box boots, and the template goes.
	states, _ := filepath.Glob(filepath.Join(home, "templates", "*", "*", "state"))
	if len(states) != 2 {
		t.Fatalf("alpine's templates: %q, want two (two agents)", states)
	}
	for _, s := range states {
		if err := os.WriteFile(s, []byte("not a state"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := start(trt, "alpine:latest", "boot")
	if note := d.Info().Runtime.StartNote; !strings.Contains(note, "template") {
		t.Errorf("start note %q does not say why the template was not used", note)
	}
	if left, _ := filepath.Glob(filepath.Join(home, "templates", "*", "*", "state")); len(left) != 1 {
		t.Errorf("after a failed restore, template states %q, want the other agent's only", left)
	}
}

// templateMemfd names the template memory b's VMM maps (its memfd's
// inode), or "".
func templateMemfd(t *testing.T, b *core.Box) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(b.Info().Runtime.VMMPid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ (\d+)\s+/memfd:boxlite-template`).FindSubmatch(maps)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func templateDirs(t *testing.T, home string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(home, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
