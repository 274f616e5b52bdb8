package sparse

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyData: data, zero pages and holes come out as they went in, and
// zero pages take no space.
func TestCopyData(t *testing.T) {
	dir := t.TempDir()
	src, err := os.Create(filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const size = 8 << 20
	want := make([]byte, size)
	copy(want[100:], "head")                // page 0
	copy(want[3*page+7:], "middle")         // page 3; pages 1-2 written as zeros below
	copy(want[(2<<20)+page-2:], "straddle") // across pages 512 and 513
	copy(want[size-3:], "end")
	if _, err := src.WriteAt(want[:4<<20], 0); err != nil { // zeros written as data, then a hole
		t.Fatal(err)
	}
	if _, err := src.WriteAt(want[size-page:], size-page); err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := CopyData(context.Background(), dst, src, size); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the copy differs")
	}
	exts, err := Extents(dst, size)
	if err != nil {
		t.Fatal(err)
	}
	var data int64
	for _, e := range exts {
		data += e.Len
	}
	if data > 64<<10 { // 5 pages of data, in whatever blocks the file system allocates
		t.Errorf("the copy holds %d bytes of data, want only the pages that are not zero", data)
	}
}
