// Package pinned installs the real clients a test drives, pinned, from the
// registries into places of their own under the repository's build/: a
// virtualenv (PyPI) or a node project (npm), made on first use and again
// when the pinned version changed. The registry is all they need from
// outside; installs have a deadline.
package pinned

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installTimeout bounds one install (a venv and pip, or npm).
const installTimeout = 10 * time.Minute

// Venv is the python of the virtualenv build/venvs/NAME holding
// pkg==version from PyPI (and the pins in also).
func Venv(t testing.TB, repo, name, pkg, version string, also ...string) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "venvs", name)
	py := filepath.Join(dir, "bin", "python")
	check := exec.Command(py, "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))", pkg)
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == version {
		return py
	}
	os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	for _, args := range [][]string{
		{"python3", "-m", "venv", dir},
		append([]string{filepath.Join(dir, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", pkg + "==" + version}, also...),
	} {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	return py
}

// NodeProject is the node project build/nodeprojects/NAME (an ES module
// package) with pkg@version from npm (and the pins in also).
func NodeProject(t testing.TB, repo, name, pkg, version string, also ...string) string {
	t.Helper()
	dir := filepath.Join(repo, "build", "nodeprojects", name)
	check := exec.Command("node", "-e", "console.log(require(process.argv[1] + '/package.json').version)", pkg)
	check.Dir = dir
	if out, err := check.Output(); err == nil && strings.TrimSpace(string(out)) == version {
		return dir
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"boxlite-client-test","private":true,"type":"module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", append([]string{"install", "--no-audit", "--no-fund", "--save-exact", pkg + "@" + version}, also...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	return dir
}
