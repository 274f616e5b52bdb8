package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/cmdrun"
	"github.com/boxlite/boxlite/tests/internal/readme"
)

// The fragments share a home of their own, where the test images are loaded
// (alpine:latest, python:slim) as `make images` loads them.
var (
	fragOnce sync.Once
	fragHome string
	fragErr  error
)

func fragmentHome(t *testing.T) string {
	t.Helper()
	alpine, python := images(t)
	fragOnce.Do(func() {
		if fragHome, fragErr = os.MkdirTemp("", "boxlite-readme-home."); fragErr != nil {
			return
		}
		for _, img := range []string{alpine, python} {
			c := cmdrun.Cmd{Env: userEnv(t, fragHome), Timeout: stepTimeout}
			if out, stderr, code := c.Run(t, filepath.Join(readme.Root(), "build", "boxlite"), "image", "load", img); code != 0 {
				fragErr = fmt.Errorf("image load %s: exit %d\n%s%s", img, code, out, stderr)
				return
			}
		}
	})
	if fragErr != nil {
		t.Fatal(fragErr)
	}
	return fragHome
}

// removeFragmentHome ends what the fragments left (detached boxes) and
// removes their home; TestMain calls it.
func removeFragmentHome() {
	if fragHome == "" {
		return
	}
	cli := filepath.Join(readme.Root(), "build", "boxlite")
	c := cmdrun.Cmd{Env: append(os.Environ(), "BOXLITE_HOME="+fragHome), Timeout: time.Minute}
	c.Run(noFail{}, "sh", "-c", cli+" ls -aq | xargs -r "+cli+" rm -f")
	_ = os.RemoveAll(fragHome)
}

// indent puts prefix before every non-blank line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(l)
	}
	return b.String()
}

// pyAsync is the wrapper of python-async-fragment: the fragment is the body
// of `async def main()` in a program that imports boxlite and runs it.
func pyAsync(fragment string) string {
	return "import asyncio, boxlite\n\nasync def main():\n" + indent(fragment, "    ") + "\nasyncio.run(main())\n"
}

// runPython runs a Python program with the checkout's bindings
// (PYTHONPATH bindings/python: the build's libboxlite.so and assets) in the
// fragments' home; it returns its stdout.
func runPython(t *testing.T, where, program string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fragment.py")
	must(t, os.WriteFile(file, []byte(program), 0o644))
	env := append(userEnv(t, fragmentHome(t)), "PYTHONPATH="+filepath.Join(readme.Root(), "bindings", "python"))
	out, code := runLogged(t, cmdrun.Cmd{Env: env}, where, "python3", file)
	if code != 0 {
		t.Fatalf("%s: exit %d; the program:\n%s", where, code, program)
	}
	return out
}

// TestPythonFragments runs the blocks marked python-async-fragment, each
// the body of `async def main()` (pyAsync).
func TestPythonFragments(t *testing.T) {
	for _, b := range blocks(t)(readme.Named("python-async-fragment")) {
		runPython(t, fmt.Sprintf("README.md:%d", b.Line), pyAsync(b.Text))
	}
}

// TestPythonPrograms runs README.md's whole Python programs with the
// checkout's bindings too (the install tests run them against the wheel).
func TestPythonPrograms(t *testing.T) {
	for _, name := range []string{"python-codebox", "python-simplebox"} {
		src, err := readme.Snippet(name)
		must(t, err)
		out := runPython(t, "README.md: "+name, src)
		if name == "python-codebox" && !strings.HasPrefix(out, "42\n") {
			t.Errorf("README.md's python-codebox printed %q; its comment says 42 first", out)
		}
	}
}

// TestPythonTwoProcesses runs the blocks marked python-async-two-processes:
// the lines through the one that says `# process 1 exits` in one process,
// the rest in a second, each the body of `async def main()` (pyAsync); the
// second prints the first's 42.
func TestPythonTwoProcesses(t *testing.T) {
	for _, b := range blocks(t)(readme.Named("python-async-two-processes")) {
		i := strings.Index(b.Text, "# process 1 exits")
		if i < 0 {
			t.Fatalf("README.md:%d: no line says `# process 1 exits`", b.Line)
		}
		i += strings.Index(b.Text[i:], "\n") + 1
		runPython(t, fmt.Sprintf("README.md:%d (process 1)", b.Line), pyAsync(b.Text[:i]))
		if out := runPython(t, fmt.Sprintf("README.md:%d (process 2)", b.Line), pyAsync(b.Text[i:])); strings.TrimSpace(out) != "42" {
			t.Fatalf("README.md:%d: the second process printed %q, want 42", b.Line, out)
		}
	}
}

// The Go fragments' wrappers: functions of one program in a module of its
// own (require and replace to this checkout), run in order. Both have ctx
// and rt (boxlite.NewRuntime()) and an `err` declared beforehand and checked
// afterwards; go-box-fragment also `box`, a started python:slim box.
const goMain = `package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/boxlite/boxlite"
)

var _, _ = fmt.Sprint, time.Second

func main() {
	ctx := context.Background()
	rt, err := boxlite.NewRuntime()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
%s}
`

const goRuntimeFragment = `
// %s (go-runtime-fragment)
func fragment%d(ctx context.Context, rt *boxlite.Runtime) {
	var err error
%s	if err != nil {
		log.Fatal(err)
	}
}
`

const goBoxFragment = `
// %s (go-box-fragment)
func fragment%d(ctx context.Context, rt *boxlite.Runtime) {
	box, err := rt.Create(ctx, "python:slim")
	if err != nil {
		log.Fatal(err)
	}
	defer box.Stop(ctx)
	if err := box.Start(ctx); err != nil {
		log.Fatal(err)
	}
%s	if err != nil {
		log.Fatal(err)
	}
}
`

// TestGoFragments builds and runs the blocks marked go-runtime-fragment and
// go-box-fragment (the runtime's first, as its pull brings python:slim).
func TestGoFragments(t *testing.T) {
	home := fragmentHome(t)
	var calls, funcs strings.Builder
	n := 0
	for _, kind := range []struct {
		blocks  []readme.Block
		wrapper string
	}{
		{blocks(t)(readme.Named("go-runtime-fragment")), goRuntimeFragment},
		{blocks(t)(readme.Named("go-box-fragment")), goBoxFragment},
	} {
		for _, b := range kind.blocks {
			fmt.Fprintf(&calls, "\tfragment%d(ctx, rt)\n", n)
			fmt.Fprintf(&funcs, kind.wrapper, fmt.Sprintf("README.md:%d", b.Line), n, indent(b.Text, "\t"))
			n++
		}
	}
	mod := t.TempDir()
	program := fmt.Sprintf(goMain, calls.String()) + funcs.String()
	must(t, os.WriteFile(filepath.Join(mod, "main.go"), []byte(program), 0o644))
	must(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/fragments\n\ngo 1.22\n\n"+
		"require github.com/boxlite/boxlite v0.1.0\n\nreplace github.com/boxlite/boxlite => "+readme.Root()+"\n"), 0o644))
	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "fragments", "."}} {
		if _, code := runLogged(t, cmdrun.Cmd{Env: goEnv, Dir: mod}, "go "+strings.Join(args, " "), "go", args...); code != 0 {
			t.Fatalf("go %s failed; the program:\n%s", strings.Join(args, " "), program)
		}
	}
	// A program of the user's outside the checkout: the assets named, as the README says.
	env := append(userEnv(t, home), "BOXLITE_ASSETS="+filepath.Join(readme.Root(), "build"))
	out, code := runLogged(t, cmdrun.Cmd{Env: env, Dir: mod}, "the Go fragments", filepath.Join(mod, "fragments"))
	if code != 0 {
		t.Fatalf("the Go fragments: exit %d; the program:\n%s", code, program)
	}
	if !strings.Contains(out, `{"a": 2}`) || !strings.Contains(out, "42") {
		t.Fatalf("the Go fragments printed %q; the session's comment says {\"a\": 2} then 42", out)
	}
}

// runNode runs a program (file: its name, .mjs for an ES module, .cjs for
// CommonJS) that imports from boxlite-go (bindings/node, built by `make
// node`) in the fragments' home.
func runNode(t *testing.T, where, file, program string) {
	t.Helper()
	pkg := filepath.Join(readme.Root(), "bindings", "node")
	if _, err := os.Stat(filepath.Join(pkg, "native", "boxlite.node")); err != nil {
		t.Fatalf("needs the Node addon (make node): %v", err)
	}
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755))
	must(t, os.Symlink(pkg, filepath.Join(dir, "node_modules", "boxlite-go")))
	must(t, os.WriteFile(filepath.Join(dir, file), []byte(program), 0o644))
	if _, code := runLogged(t, cmdrun.Cmd{Env: userEnv(t, fragmentHome(t)), Dir: dir}, where, "node", file); code != 0 {
		t.Fatalf("%s: exit %d; the program:\n%s", where, code, program)
	}
}

// TestNodeFragments runs README.md's blocks marked node-esm-fragment, each
// as an ES module that imports SimpleBox from boxlite-go and stops `box`
// after it; and bindings/node/README.md's marked node-box-fragment, the
// same with `box` a SimpleBox of alpine:latest made before it.
func TestNodeFragments(t *testing.T) {
	for _, b := range blocks(t)(readme.Named("node-esm-fragment")) {
		runNode(t, fmt.Sprintf("README.md:%d", b.Line), "fragment.mjs", "import { SimpleBox } from 'boxlite-go';\n"+b.Text+"await box.stop();\n")
	}
	for _, b := range blocks(t)(readme.NamedIn("bindings/node/README.md", "node-box-fragment")) {
		runNode(t, fmt.Sprintf("bindings/node/README.md:%d", b.Line), "fragment.mjs", "import { SimpleBox } from 'boxlite-go';\n"+
			"const box = new SimpleBox({ image: 'alpine:latest' });\ntry {\n"+indent(b.Text, "  ")+"} finally {\n  await box.stop();\n}\n")
	}
	// README.md's whole CommonJS program too (the install tests run it against the npm package).
	src, err := readme.Snippet("node-cjs")
	must(t, err)
	runNode(t, "README.md: node-cjs", "program.cjs", src)
}

// noFail is the testing.TB of cleanups run after the tests: it records nothing.
type noFail struct{ testing.TB }

func (noFail) Helper()               {}
func (noFail) Fatalf(string, ...any) {}
func (noFail) Logf(string, ...any)   {}
func (noFail) Errorf(string, ...any) {}
func (noFail) Fatal(...any)          {}
