package envd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the code from the protos with the
// pinned tools (gen.go, buf.gen.yaml; fetched through the Go module proxy
// the first time) into a temporary directory and compares it with what is
// committed.
func TestGeneratedCodeIsFresh(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "run", "github.com/bufbuild/buf/cmd/buf@v1.75.0", "generate", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, b)
	}
	n := 0
	err := filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(rel)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./internal/e2b/envd` and commit", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("buf generated %d files, want 4", n)
	}
}
