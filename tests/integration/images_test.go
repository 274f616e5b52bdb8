package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/cmdrun"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// The python:slim stand-in (tests/images/python-image.sh) is loaded once, by
// whichever test needs it first.
var pythonLoad struct {
	once sync.Once
	err  error
}

func needPython(t *testing.T) {
	t.Helper()
	path := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if path == "" {
		t.Fatal("BOXLITE_TEST_PYTHON_IMAGE is not set: `make test` builds the python:slim test image (tests/images/python-image.sh, as root) and sets it")
	}
	pythonLoad.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		_, pythonLoad.err = rt.Images().Load(ctx, path)
		t.Logf("python:slim loaded in %.1fs", time.Since(start).Seconds())
	})
	if pythonLoad.err != nil {
		t.Fatalf("load %s: %v", path, pythonLoad.err)
	}
}

// cli runs the boxlite CLI with the test's home and returns its stdout, stderr and exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return cmdrun.Cmd{Timeout: 2 * time.Minute}.Run(t, filepath.Join(repo, "build", "boxlite"), args...)
}

func TestPythonCLI(t *testing.T) {
	t.Parallel()
	needPython(t)
	img, err := rt.Images().Get("python:slim")
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, kv := range img.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PYTHON_VERSION="); ok {
			version = v
		}
	}
	start := time.Now()
	out, errOut, code := cli(t, "run", "--rm", "python:slim", "--", "python", "-c", "import sys; print(sys.version)")
	t.Logf("boxlite run --rm python:slim -- python -c ...: %.1fs", time.Since(start).Seconds())
	if code != 0 || version == "" || !strings.HasPrefix(out, version+" ") {
		t.Fatalf("exit %d, stdout %q (image says PYTHON_VERSION=%s), stderr %q", code, out, version, errOut)
	}
}

// One box for the rest of what the python:slim image must do.
func TestPythonBox(t *testing.T) {
	t.Parallel()
	needPython(t)
	ctx := context.Background()
	start := time.Now()
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, true)
	booted := time.Since(start)
	run := func(argv ...string) *boxlite.ExecResult { return runIn(t, b, boxlite.Command{Argv: argv}) }
	res := run("python", "-c", "pass")
	t.Logf("python:slim box: boot %.1fs, then first python -c pass %.2fs", booted.Seconds(), time.Since(start).Seconds()-booted.Seconds())
	if res.Code != 0 {
		t.Fatalf("python -c pass: exit %d, stderr %q", res.Code, res.Stderr)
	}
	t0 := time.Now()
	run("python", "-c", "pass")
	t.Logf("python -c pass again: %.2fs", time.Since(t0).Seconds())

	// The official image's layout and environment.
	res = run("python3", "-c", `import os, sys; print(sys.executable, os.getcwd(), os.environ["LANG"], "h\u00e9llo")`)
	if got := string(res.Stdout); got != "/usr/local/bin/python3 / C.UTF-8 héllo\n" {
		t.Errorf("python3: %q, stderr %q", got, res.Stderr)
	}
	res = run("/usr/local/bin/python", "-c", "raise ValueError('boom')")
	if res.Code == 0 || !strings.Contains(string(res.Stderr), "Traceback (most recent call last)") || !strings.Contains(string(res.Stderr), "ValueError: boom") {
		t.Errorf("raise: exit %d, stderr %q", res.Code, res.Stderr)
	}
	res = run("pip", "--version")
	if res.Code != 0 || !strings.HasPrefix(string(res.Stdout), "pip ") {
		t.Errorf("pip --version: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	// pip may install into the system Python, as in the official image: no
	// PEP 668 marker (pip install would say "externally-managed-environment";
	// it is not run here: pip takes seconds to start under emulation).
	res = run("python", "-c", "import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))")
	if got := string(res.Stdout); got != "False\n" {
		t.Errorf("EXTERNALLY-MANAGED exists: %q, stderr %q", got, res.Stderr)
	}
	res = run("python", "-c", "import json, sqlite3, ssl, venv, ctypes, pip")
	if res.Code != 0 {
		t.Errorf("stdlib imports: exit %d, stderr %q", res.Code, res.Stderr)
	}
	// The image's bytecode is valid (checked-hash .pyc), so Python wrote none:
	// every file in the image has mtime 0, anything newer was written in the box.
	res = run("find", "/usr/lib", "-newer", "/usr/bin/python3", "-name", "*.pyc")
	if res.Code != 0 || len(res.Stdout) != 0 {
		t.Errorf("bytecode written in the box (exit %d): %s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// An image's Env, WorkingDir, User, Entrypoint and Cmd, for `boxlite run IMAGE`
// without a command. The images are busybox-based, made by mkimage.
func TestImageConfig(t *testing.T) {
	t.Parallel()
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("sh", filepath.Join(repo, "tests/images/busybox-rootfs.sh"), rootfs).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	os.MkdirAll(filepath.Join(rootfs, "app"), 0o755)
	script := "#!/bin/sh\n" +
		`echo "argv: $0$(printf ' [%s]' "$@")"` + "\n" +
		`echo "cwd: $(pwd) id: $(id -u):$(id -g) home: $HOME"` + "\n" +
		`echo "env: $GREETING $PATH"` + "\n"
	if err := os.WriteFile(filepath.Join(rootfs, "app", "show"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	mkimage := func(name string, flags ...string) {
		out := filepath.Join(t.TempDir(), "image.tar")
		args := append([]string{"run", "./tests/images/mkimage", "-name", name, "-rootfs", rootfs, "-o", out,
			"-chown", "/home/box=1000:1000"}, flags...)
		cmd := exec.Command("go", args...)
		cmd.Dir = repo
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mkimage: %v\n%s", err, b)
		}
		if _, err := rt.Images().Load(context.Background(), out); err != nil {
			t.Fatal(err)
		}
	}
	mkimage("boxlite-test/config-named:latest", "-entrypoint", "/app/show", "-entrypoint", "first",
		"-cmd", "two words", "-cmd", "three", "-user", "box", "-workdir", "/home/box",
		"-env", "GREETING=hello there", "-env", "PATH=/app:/usr/bin:/bin")
	mkimage("boxlite-test/config-numeric:latest", "-cmd", `["/app/show","x"]`, "-user", "1234:4321",
		"-workdir", "/tmp", "-env", "PATH=/usr/bin:/bin")

	for _, c := range []struct {
		image string
		args  []string
		want  string
	}{
		{"boxlite-test/config-named", nil, "argv: /app/show [first] [two words] [three]\n" +
			"cwd: /home/box id: 1000:1000 home: /home/box\nenv: hello there /app:/usr/bin:/bin\n"},
		// As docker run: a given command replaces Cmd and follows Entrypoint.
		{"boxlite-test/config-named", []string{"--", "given"}, "argv: /app/show [first] [given]\n" +
			"cwd: /home/box id: 1000:1000 home: /home/box\nenv: hello there /app:/usr/bin:/bin\n"},
		{"boxlite-test/config-numeric", nil, "argv: /app/show [x]\ncwd: /tmp id: 1234:4321 home: /\nenv:  /usr/bin:/bin\n"},
	} {
		t.Run(filepath.Base(c.image), func(t *testing.T) {
			t.Parallel()
			out, errOut, code := cli(t, append([]string{"run", "--rm", c.image}, c.args...)...)
			if code != 0 || out != c.want {
				t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q", code, out, c.want, errOut)
			}
		})
	}
}
