package boxlite_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/boxlite/boxlite"
)

// The C library, its CMake project, the Rust crates and the Python and Node
// packages carry the same version as the Go module (boxlite.Version, which
// `boxlite --version` prints).
func TestVersionsAgree(t *testing.T) {
	for file, pattern := range map[string]string{
		"include/boxlite.h":                   `#define BOXLITE_VERSION_STRING "([^"]+)"`,
		"CMakeLists.txt":                      `project\(boxlite VERSION (\S+)`,
		"bindings/rust/Cargo.toml":            `(?m)^version = "([^"]+)"`,
		"bindings/python/pyproject.toml":      `(?m)^version = "([^"]+)"`,
		"bindings/python/boxlite/__init__.py": `(?m)^__version__ = "([^"]+)"`,
		"bindings/node/package.json":          `(?m)^  "version": "([^"]+)"`,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pattern).FindSubmatch(b)
		if m == nil || string(m[1]) != boxlite.Version {
			t.Errorf("%s: version %q, want %s (boxlite.Version)", file, m, boxlite.Version)
		}
	}
}
