package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

// TestCopyLayoutBoxLite: with CopyOptions.Layout LayoutBoxLite a directory
// lands inside the destination under its own name, the destination made if
// missing, both ways (BoxLite 0.10's copy example); files and a directory's
// contents land as with docker cp; a failed copy out leaves no directory it
// made.
func TestCopyLayoutBoxLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bl := boxlite.CopyOptions{Layout: boxlite.LayoutBoxLite}
	src := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runIn(t, shared, sh("rm -rf /lay && mkdir -p /lay/exists"))
	for _, dst := range []string{"/lay/new", "/lay/exists"} {
		if err := shared.CopyIn(ctx, src, dst, bl); err != nil {
			t.Fatal(err)
		}
		if res := runIn(t, shared, sh("cat "+dst+"/tree/sub/f")); string(res.Stdout) != "hi\n" {
			t.Errorf("copy in to %s: %q %q", dst, res.Stdout, res.Stderr)
		}
	}
	if err := shared.CopyIn(ctx, src+"/.", "/lay/contents", bl); err != nil {
		t.Fatal(err)
	}
	if err := shared.CopyIn(ctx, filepath.Join(src, "sub", "f"), "/lay/file.txt", bl); err != nil {
		t.Fatal(err)
	}
	if res := runIn(t, shared, sh("cat /lay/contents/sub/f /lay/file.txt")); string(res.Stdout) != "hi\nhi\n" {
		t.Errorf("contents and file: %q %q", res.Stdout, res.Stderr)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := shared.CopyOut(ctx, "/lay/new", out, bl); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "new", "tree", "sub", "f")); err != nil || string(b) != "hi\n" {
		t.Errorf("copy out: %q %v", b, err)
	}
	file := filepath.Join(t.TempDir(), "f.txt")
	if err := shared.CopyOut(ctx, "/lay/file.txt", file, bl); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "hi\n" {
		t.Errorf("file out: %q %v", b, err)
	}
	// Past its cap the copy fails, and the destination it made is gone again.
	capped := filepath.Join(t.TempDir(), "made", "here")
	err := shared.CopyOut(ctx, "/lay", capped, boxlite.CopyOptions{Layout: boxlite.LayoutBoxLite, MaxEntries: 2})
	if err == nil || !strings.Contains(err.Error(), "entries") {
		t.Fatalf("capped copy: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(capped)); !os.IsNotExist(err) {
		t.Errorf("a failed copy left the directory it made: %v", err)
	}
}
