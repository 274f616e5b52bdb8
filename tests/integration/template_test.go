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

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
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
	trt, err := boxlite.NewRuntime(boxlite.WithHome(home), boxlite.WithTemplates(true))
	if err != nil {
		t.Fatal(err)
	}
	defer trt.Close()
	if _, err := trt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		t.Fatal(err)
	}
	// start creates a box, runs a command in it and checks how it started.
	start := func(rt *boxlite.Runtime, image, want string, opts ...boxlite.BoxOption) (*boxlite.Box, string) {
		t.Helper()
		b, err := rt.Create(ctx, image, append(opts, boxlite.WithAutoRemove(false))...) // stopped and started again
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(context.Background(), true) })
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c",
			"hostname; cat /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; date +%s; cat /proc/sys/kernel/random/uuid"}})
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
	b, outB := start(trt, "alpine:latest", "template", boxlite.WithHostname("box-b"))
	c, outC := start(trt, "alpine:latest", "template", boxlite.WithHostname("box-c"))
	// Each restored box has its own lane, at the template's drive.
	laneRoundTrip(ctx, t, b)
	laneRoundTrip(ctx, t, c)
	seen := map[string]string{}
	for _, o := range []struct {
		host, out string
	}{{boxlite.DefaultHostname, first}, {"box-b", outB}, {"box-c", outC}} {
		f := strings.Fields(o.out)
		if len(f) != 5 {
			t.Fatalf("box said %q", o.out)
		}
		if f[0] != o.host {
			t.Errorf("hostname %q, want %s", f[0], o.host)
		}
		for i, what := range []string{"hostname", "boot id", "random bytes", "", "uuid"} {
			if what == "" {
				continue // the clock, below
			}
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
	runIn(t, b, boxlite.Command{Argv: []string{"sh", "-c", "echo kept > /root/f && sync"}})
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if info := b.Info().Runtime; info.Start != "boot" {
		t.Errorf("a restarted box started by %q, want boot (its disk is its own now)", info.Start)
	}
	if res := runIn(t, b, boxlite.Command{Argv: []string{"cat", "/root/f"}}); string(res.Stdout) != "kept\n" {
		t.Errorf("after a restart /root/f = %q", res.Stdout)
	}

	// Another agent (here: its initramfs changed) makes a new template once.
	assets := t.TempDir()
	src := os.Getenv("BOXLITE_ASSETS")
	for _, f := range []string{"boxlite-shim", "boxlite-net", "guest/vmlinuz", "virtiofsd"} {
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
	rt2, err := boxlite.NewRuntime(boxlite.WithHome(home), boxlite.WithAssets(assets), boxlite.WithTemplates(true))
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
func templateMemfd(t *testing.T, b *boxlite.Box) string {
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

// TestPrestartedSessions: a box that asks for prestarted sessions finds a
// Python driver and a shell that its template VM started, and its first
// default sessions take them over (the same pids in every box of the
// template); a session with options of its own starts fresh; each box's
// interpreter is its own (random state, hostname).
func TestPrestartedSessions(t *testing.T) {
	needPython(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// parked returns the pids of the box's processes whose command line
	// contains pattern (grep's basic regexp over NUL-separated words).
	parked := func(b *boxlite.Box, pattern string) string {
		t.Helper()
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c",
			`for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q -e "$1" && echo ${p#/proc/}; done; true`, "sh", pattern}})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	cell := func(s *boxlite.Session) string {
		t.Helper()
		r, err := s.Run(ctx, "import random, socket\nprint(random.getrandbits(64), socket.gethostname())", time.Minute)
		if err != nil || r.Error != nil {
			t.Fatalf("cell: %v %+v %s", err, r.Error, r.Stderr)
		}
		return strings.TrimSpace(string(r.Stdout))
	}
	box := func(name string) (*boxlite.Box, string, string) {
		t.Helper()
		b, err := boxtest.CreateStarted(ctx, rt, "python:slim", boxlite.WithPrestart(boxlite.PrestartPython, boxlite.PrestartShell), boxlite.WithHostname(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(context.Background(), true) })
		if st := b.Info().Runtime.Start; st != "new-template" && st != "template" {
			t.Fatalf("box %s started by %q (%s)", name, st, b.Info().Runtime.StartNote)
		}
		py, sh := parked(b, "boxlite-sessio[n]"), parked(b, "^/bin/sh $") // [n]: not the grep itself
		if py == "" || strings.Contains(py, "\n") || sh == "" || strings.Contains(sh, "\n") {
			t.Fatalf("box %s: parked python %q, shell %q; want one of each", name, py, sh)
		}
		return b, py, sh
	}

	a, pyA, shA := box("pre-a")
	t0 := time.Now()
	sa, err := a.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	t.Logf("a prestarted python session answered in %.0f ms", float64(time.Since(t0).Microseconds())/1000)
	if got := strconv.Itoa(sa.Pid()); got != pyA {
		t.Fatalf("the session's interpreter is pid %s, the parked one %s", got, pyA)
	}
	outA := cell(sa)
	sh, err := a.NewShellSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if got := strconv.Itoa(sh.Pid()); got != shA {
		t.Fatalf("the shell session is pid %s, the parked shell %s", got, shA)
	}
	if res, err := sh.Exec(ctx, []string{"sh", "-c", "cd /tmp && echo $(hostname) $PWD"}, nil, time.Minute); err != nil || strings.TrimSpace(string(res.Stdout)) != "pre-a /tmp" {
		t.Fatalf("shell session: %v %+v", err, res)
	}

	b, pyB, _ := box("pre-b")
	if st := b.Info().Runtime.Start; st != "template" {
		t.Fatalf("the second box started by %q, want template", st)
	}
	// Options of its own: a fresh interpreter, the parked one stays.
	t0 = time.Now()
	own, err := b.NewPythonSession(ctx, boxlite.SessionOptions{Env: map[string]string{"OWN": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a fresh python session answered in %.0f ms", float64(time.Since(t0).Microseconds())/1000)
	if strconv.Itoa(own.Pid()) == pyB {
		t.Fatalf("a session with its own env took over the parked interpreter")
	}
	own.Close()
	sb, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if got := strconv.Itoa(sb.Pid()); got != pyB || pyB != pyA {
		t.Fatalf("box b's session is pid %s, its parked one %s, box a's %s: want one restored pid", got, pyB, pyA)
	}
	outB := cell(sb)
	fa, fb := strings.Fields(outA), strings.Fields(outB)
	if len(fa) != 2 || len(fb) != 2 || fa[1] != "pre-a" || fb[1] != "pre-b" {
		t.Fatalf("cells said %q and %q, want random bits and the box's hostname", outA, outB)
	}
	if fa[0] == fb[0] {
		t.Fatalf("two boxes' prestarted interpreters drew the same random bits %s", fa[0])
	}
}
