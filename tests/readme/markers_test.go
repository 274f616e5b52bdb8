// Package readme runs the README's code blocks that no other test runs (the
// CLI's, the fragments of Python, Go and JavaScript), and checks that every
// block of README.md is run: TestEveryBlockIsRun.
package readme

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/tests/internal/readme"
)

// The READMEs whose every block carries a marker, each test marker with its test.
var markedFiles = []string{"README.md", "bindings/python/README.md", "bindings/node/README.md"}

// TestEveryBlockIsRun fails when a block of the READMEs has no marker, or when
// a marker names a test that does not run it: no runner source takes that
// name from that file (a Go test's readme.Snippet/Named/NamedIn,
// a script's `snippet "$repo/FILE" NAME`, tests/rust/build.rs's snippet).
func TestEveryBlockIsRun(t *testing.T) {
	root := readme.Root()
	runners := runnerSources(t, root)
	for _, rel := range markedFiles {
		blocks, err := readme.Parse(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			switch {
			case b.Test != "":
				if !runs(runners, rel, b.Test) {
					t.Errorf("%s:%d: <!-- test: %s --> but no test takes %q from %s", rel, b.Line, b.Test, b.Test, rel)
				}
			case b.NotRun == "":
				t.Errorf("%s:%d: a ```%s block with neither <!-- test: NAME --> nor <!-- not run: REASON --> before it", rel, b.Line, b.Lang)
			}
		}
	}
}

// runs reports whether a runner source takes block name from file rel.
func runs(runners map[string]string, rel, name string) bool {
	q := regexp.QuoteMeta(name)
	pats := []string{`snippet "\$repo/` + regexp.QuoteMeta(rel) + `" ` + q + `\b`,
		`readme\.NamedIn\("` + regexp.QuoteMeta(rel) + `", "` + q + `"\)`}
	if rel == "README.md" {
		pats = append(pats, `readme\.(Snippet|Named)\("`+q+`"\)`, `snippet\(&\w+, "`+q+`"\)`)
	}
	for path, src := range runners {
		for _, p := range pats {
			if regexp.MustCompile(p).MatchString(src) && kindOK(path, p) {
				return true
			}
		}
	}
	return false
}

// kindOK keeps each pattern to its own kind of runner source.
func kindOK(path, pat string) bool {
	switch {
	case strings.HasPrefix(pat, `readme\.`):
		return strings.HasSuffix(path, "_test.go")
	case strings.HasPrefix(pat, `snippet\(`):
		return strings.HasSuffix(path, ".rs")
	default:
		return strings.HasSuffix(path, ".sh")
	}
}

// runnerSources are the test sources that may run README blocks: Go test
// files, the install and C tests' scripts, the Rust test's build script.
func runnerSources(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "build", "dist", "node_modules", ".git", "target":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			add(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, glob := range []string{"tests/install/*.sh", "tests/c/*.sh", "tests/rust/build.rs"} {
		ms, _ := filepath.Glob(filepath.Join(root, glob))
		if len(ms) == 0 {
			t.Fatalf("no %s", glob)
		}
		for _, m := range ms {
			add(m)
		}
	}
	return out
}
