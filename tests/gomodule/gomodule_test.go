// Package gomodule uses boxlite as a Go user does: a module of its own that
// requires github.com/boxlite/boxlite (a replace to this checkout, or go get
// from the proxy directory `make dist-native` writes, as the README says),
// the README's Go program built as it is, its assets installed in the
// documented layout, run with no BOXLITE_* variable.
package gomodule

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/cmdrun"
	"github.com/boxlite/boxlite/tests/internal/readme"
)

// assetFiles are what `make install` puts in PREFIX/lib/boxlite.
var assetFiles = []string{"boxlite-shim", "boxlite-net", "virtiofsd", "guest/vmlinuz", "guest/initramfs.cpio"}

func TestREADMEProgramInItsOwnModule(t *testing.T) {
	assets, image := os.Getenv("BOXLITE_ASSETS"), os.Getenv("BOXLITE_TEST_IMAGE")
	if assets == "" || image == "" {
		t.Fatal("needs BOXLITE_ASSETS (the build) and BOXLITE_TEST_IMAGE; run with `make test-go`")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	src, err := readme.Snippet("go-module")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	// The user's module: an older go line than ours, a replace to this checkout.
	mod := filepath.Join(tmp, "src")
	must(t, os.MkdirAll(mod, 0o755))
	must(t, os.WriteFile(filepath.Join(mod, "main.go"), []byte(src), 0o644))
	must(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/boxdemo\n\ngo 1.22\n\n"+
		"require github.com/boxlite/boxlite v0.1.0\n\nreplace github.com/boxlite/boxlite => "+repo+"\n"), 0o644))
	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	run(t, ctx, mod, goEnv, "go", "mod", "tidy")
	// tidy raised the user's go line to ours, not past it, and asks no other toolchain.
	ours := goLine(t, filepath.Join(repo, "go.mod"))
	theirs := goLine(t, filepath.Join(mod, "go.mod"))
	if theirs.Go.Version != ours.Go.Version || theirs.Toolchain != nil {
		t.Errorf("after go mod tidy the user's go.mod says go %s (toolchain %v); ours says go %s", theirs.Go.Version, theirs.Toolchain, ours.Go.Version)
	}

	// PREFIX/bin/boxdemo and PREFIX/lib/boxlite, as `make install` lays them out.
	prefix := filepath.Join(tmp, "prefix")
	run(t, ctx, mod, goEnv, "go", "build", "-o", filepath.Join(prefix, "bin", "boxdemo"), ".")
	for _, f := range assetFiles {
		copyFile(t, filepath.Join(assets, f), filepath.Join(prefix, "lib", "boxlite", f))
	}

	// The image in the user's default home (~/.boxlite, HOME being the
	// test's), loaded with the CLI, so that the program's pull finds it.
	home := filepath.Join(tmp, "home")
	cli := filepath.Join(repo, "build", "boxlite")
	run(t, ctx, tmp, append(os.Environ(), "BOXLITE_HOME="+filepath.Join(home, ".boxlite")), cli, "image", "load", image)

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BOXLITE_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home)
	out := run(t, ctx, tmp, env, filepath.Join(prefix, "bin", "boxdemo"))
	if !regexp.MustCompile(`^Linux \S+ .*\n exit 0\n$`).MatchString(out) {
		t.Fatalf("the README's program printed %q", out)
	}
}

func goLine(t *testing.T, path string) *modfile.File {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	f, err := modfile.ParseLax(path, b, nil)
	must(t, err)
	if f.Go == nil {
		t.Fatalf("%s has no go line", path)
	}
	return f
}

// run runs name in dir with env and returns its stdout, failing the test
// when it fails.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	deadline, _ := ctx.Deadline()
	return cmdrun.Cmd{Env: env, Dir: dir, Timeout: time.Until(deadline)}.Must(t, name, args...)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	must(t, err)
	defer in.Close()
	fi, err := in.Stat()
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(to), 0o755))
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	must(t, err)
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	must(t, out.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The README's block marked go-get: each of its two ways (split at `# or`),
// run with sh in a new module whose program prints boxlite.Version, then
// `go run .`. /path/to/boxlite, the placeholder for the user's copy, is a
// copy with the proxy directory internal/gomodproxy writes (dist/goproxy,
// the commit's files) for the first way, this checkout for the second.
func TestGoGetFromTheDistProxy(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	must(t, err)
	block, err := readme.Snippet("go-get")
	must(t, err)
	ways := regexp.MustCompile(`(?m)^# or\n`).Split(block, -1)
	if len(ways) != 2 || !strings.Contains(ways[0], "go get ") || !strings.Contains(ways[1], "-replace ") {
		t.Fatalf("the README's go-get block is not `go get ...` # or `go mod edit -replace ...`:\n%s", block)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	userCopy := filepath.Join(tmp, "boxlite")
	run(t, ctx, repo, os.Environ(), "go", "run", "./internal/gomodproxy", "-o", filepath.Join(userCopy, "dist", "goproxy"))
	for i, placeholder := range []string{userCopy, repo} {
		mod := filepath.Join(tmp, fmt.Sprintf("src%d", i))
		must(t, os.MkdirAll(mod, 0o755))
		must(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/getter\n\ngo 1.22\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/boxlite/boxlite\"\n)\n\n"+
			"func main() { fmt.Println(boxlite.Version) }\n"), 0o644))
		env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		script := strings.ReplaceAll(ways[i], "/path/to/boxlite", placeholder)
		run(t, ctx, mod, env, "sh", "-e", "-c", script)
		if out := run(t, ctx, mod, env, "go", "run", "."); out != boxlite.Version+"\n" {
			t.Fatalf("way %d of the README's go-get block: the program printed %q", i+1, out)
		}
	}
}
