package boxlite

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
)

func archive(t *testing.T, hs ...*tar.Header) *tar.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return tar.NewReader(&buf)
}

func names(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}

func TestRecodeArchive(t *testing.T) {
	var out bytes.Buffer
	err := recodeArchive(&out, archive(t,
		&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3},
		&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	), nil, filecopy.Limits{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, out.Bytes()); len(got) != 3 || got[0] != "d/" || got[1] != "d/f" || got[2] != "l" {
		t.Fatalf("entries %q", got)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "d/../../x"} {
		err := recodeArchive(io.Discard, archive(t, &tar.Header{Name: bad, Typeflag: tar.TypeReg}), nil, filecopy.Limits{}, "test")
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("entry %q: %v", bad, err)
		}
	}
	err = recodeArchive(io.Discard, archive(t, &tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 100}), nil, filecopy.Limits{MaxBytes: 10}, "test")
	if !errors.Is(err, errdefs.ErrLimit) {
		t.Errorf("over MaxBytes: %v", err)
	}
	err = recodeArchive(io.Discard, archive(t, &tar.Header{Name: "a", Typeflag: tar.TypeReg}, &tar.Header{Name: "b", Typeflag: tar.TypeReg}), nil, filecopy.Limits{MaxEntries: 1}, "test")
	if !errors.Is(err, errdefs.ErrLimit) {
		t.Errorf("over MaxEntries: %v", err)
	}
	// One file: a second entry fails.
	tr := archive(t, &tar.Header{Name: "a", Typeflag: tar.TypeReg}, &tar.Header{Name: "b", Typeflag: tar.TypeReg})
	first, _ := tr.Next()
	if err := recodeArchive(io.Discard, tr, first, filecopy.Limits{}, "test"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a second entry after the one file: %v", err)
	}
	if err := recodeArchive(io.Discard, tar.NewReader(bytes.NewReader([]byte("not a tar archive at all, just text padding it out to more than a block........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................."))), nil, filecopy.Limits{}, "test"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("garbage: %v", err)
	}
}
