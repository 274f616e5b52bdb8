package boxlite_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/boxlite/boxlite"
)

// The C library, its CMake project and the Rust crates carry the same
// version as the Go module (boxlite.Version, which `boxlite --version` prints).
func TestVersionsAgree(t *testing.T) {
	for file, pattern := range map[string]string{
		"include/boxlite.h":        `#define BOXLITE_VERSION_STRING "([^"]+)"`,
		"CMakeLists.txt":           `project\(boxlite VERSION (\S+)`,
		"bindings/rust/Cargo.toml": `(?m)^version = "([^"]+)"`,
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
