package filecopy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/boxlite/boxlite/errdefs"
)

func openDir(t *testing.T, p string) *os.File {
	t.Helper()
	d, err := Host().OpenDir(p, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestSendExtractRoundTrip(t *testing.T) {
	src := t.TempDir()
	tree := filepath.Join(src, "tree")
	must(t, os.MkdirAll(filepath.Join(tree, "sub", "deep"), 0o750))
	must(t, os.WriteFile(filepath.Join(tree, "exe"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000)
	must(t, os.WriteFile(filepath.Join(tree, "sub", "big"), big, 0o640))
	must(t, os.Symlink("../exe", filepath.Join(tree, "sub", "link")))
	must(t, os.Link(filepath.Join(tree, "exe"), filepath.Join(tree, "sub", "hard")))
	must(t, os.WriteFile(filepath.Join(tree, "suid"), nil, 0o4755))
	mt := time.Unix(1700000000, 123456789)
	must(t, os.Chtimes(filepath.Join(tree, "sub", "big"), mt, mt))

	var buf bytes.Buffer
	st, err := Send(&buf, openDir(t, src), "tree", SendOptions{Name: "tree"})
	must(t, err)
	if st.Entries != 8 || st.Bytes != int64(len(big)+18) {
		t.Fatalf("sent %+v", st)
	}
	dst := t.TempDir()
	tg, err := Prepare(Host(), filepath.Join(dst, "copy"), Place{Base: "tree", Overwrite: true})
	must(t, err)
	if _, err := tg.Extract(&buf, ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, tg.Commit())
	out := filepath.Join(dst, "copy")
	got, err := os.ReadFile(filepath.Join(out, "sub", "big"))
	must(t, err)
	if !bytes.Equal(got, big) {
		t.Fatal("big differs")
	}
	for name, mode := range map[string]os.FileMode{"exe": 0o755, "sub/big": 0o640, "sub": 0o750 | os.ModeDir, "suid": 0o755} {
		fi, err := os.Lstat(filepath.Join(out, name))
		must(t, err)
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), mode)
		}
	}
	if fi, _ := os.Stat(filepath.Join(out, "sub", "big")); !fi.ModTime().Equal(mt) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), mt)
	}
	if l, _ := os.Readlink(filepath.Join(out, "sub", "link")); l != "../exe" {
		t.Errorf("link %q", l)
	}
	a, _ := os.Stat(filepath.Join(out, "exe"))
	b, _ := os.Stat(filepath.Join(out, "sub", "hard"))
	if !os.SameFile(a, b) {
		t.Error("hard link not kept")
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}

type ent struct {
	name, link string
	typ        byte
	body       string
	mode       int64
	size       int64 // claimed size when body is empty
}

func archive(t *testing.T, ents ...ent) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.mode != 0 {
			h.Mode = e.mode
		}
		if e.size != 0 {
			h.Size = e.size
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			b.Truncate(b.Len()) // no data: the stream is cut
			return &b
		}
		must(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(e.body))
		must(t, err)
	}
	must(t, tw.Close())
	return &b
}

func TestExtractRefusesHostileStreams(t *testing.T) {
	cases := []struct {
		name string
		ents []ent
		kind error
		want string
	}{
		{"dotdot", []ent{{name: "x/../../evil", typ: tar.TypeReg, body: "x"}}, errdefs.ErrInvalidArgument, "unsafe path"},
		{"absolute", []ent{{name: "/etc/evil", typ: tar.TypeReg, body: "x"}}, errdefs.ErrInvalidArgument, "absolute path"},
		{"other-top", []ent{{name: "y/evil", typ: tar.TypeReg, body: "x"}}, errdefs.ErrInvalidArgument, "not under"},
		{"through-symlink", []ent{
			{name: "x/", typ: tar.TypeDir},
			{name: "x/l", typ: tar.TypeSymlink, link: "../../outside"},
			{name: "x/l/evil", typ: tar.TypeReg, body: "x"},
		}, errdefs.ErrInvalidArgument, "through a symlink"},
		{"hardlink-outside", []ent{{name: "x/h", typ: tar.TypeLink, link: "x/../../outside/secret"}}, errdefs.ErrInvalidArgument, "unsafe hard link target"},
		{"hardlink-preexisting", []ent{{name: "x/h", typ: tar.TypeLink, link: "x/old"}}, errdefs.ErrInvalidArgument, "not in the stream"},
		{"oversize", []ent{{name: "x/big", typ: tar.TypeReg, size: 1 << 40}}, errdefs.ErrLimit, "more than"},
		{"long-name", []ent{{name: "x/" + strings.Repeat("a", 300), typ: tar.TypeReg}}, errdefs.ErrLimit, "longer than 255"},
		{"truncated", []ent{{name: "x/f", typ: tar.TypeReg, size: 100}}, errdefs.ErrInvalidArgument, "ends in the middle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			outside := filepath.Join(top, "outside")
			must(t, os.Mkdir(outside, 0o700))
			must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
			dst := filepath.Join(top, "a", "b")
			must(t, os.MkdirAll(filepath.Join(dst, "x"), 0o755))
			must(t, os.WriteFile(filepath.Join(dst, "x", "old"), []byte("o"), 0o600))
			tg, err := Prepare(Host(), dst, Place{Base: "x", Overwrite: true}) // merges into dst/x
			must(t, err)
			defer tg.Discard()
			_, err = tg.Extract(archive(t, c.ents...), ExtractOptions{Limits: Limits{MaxBytes: 1 << 30}})
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("extract: %v; want %v naming %q", err, c.kind, c.want)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Fatalf("outside touched: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(top, "evil")); err == nil {
				t.Fatal("evil written outside")
			}
		})
	}
}

func TestExtractNeverFollowsPlantedSymlinks(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	must(t, os.Mkdir(outside, 0o700))
	dst := filepath.Join(top, "dst")
	must(t, os.MkdirAll(filepath.Join(dst, "x"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(dst, "x", "sub")))                   // a directory link
	must(t, os.Symlink(filepath.Join(outside, "f"), filepath.Join(dst, "x", "f"))) // a file link
	tg, err := Prepare(Host(), dst, Place{Base: "x", Overwrite: true})
	must(t, err)
	_, err = tg.Extract(archive(t, ent{name: "x/f", typ: tar.TypeReg, body: "new"}, ent{name: "x/sub/g", typ: tar.TypeReg, body: "g"}), ExtractOptions{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "through a symlink") {
		t.Fatalf("extract: %v", err)
	}
	tg.Discard()
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote outside: %v", ents)
	}
	// The file link was replaced by a file, not written through.
	if fi, err := os.Lstat(filepath.Join(dst, "x", "f")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("x/f: %v %v", fi, err)
	}
}

func TestExtractSkipsDevicesAndDropsSetID(t *testing.T) {
	dst := t.TempDir()
	tg, err := Prepare(Host(), filepath.Join(dst, "new"), Place{Base: "x", Overwrite: true})
	must(t, err)
	st, err := tg.Extract(archive(t,
		ent{name: "x/", typ: tar.TypeDir, mode: 0o2755},
		ent{name: "x/null", typ: tar.TypeChar},
		ent{name: "x/fifo", typ: tar.TypeFifo},
		ent{name: "x/suid", typ: tar.TypeReg, body: "s", mode: 0o6755},
	), ExtractOptions{})
	must(t, err)
	must(t, tg.Commit())
	if st.Skipped != 2 || st.Entries != 2 {
		t.Fatalf("stats %+v", st)
	}
	ents, _ := os.ReadDir(filepath.Join(dst, "new"))
	if len(ents) != 1 {
		t.Fatalf("entries %v", ents)
	}
	for _, n := range []string{"new", "new/suid"} {
		fi, _ := os.Stat(filepath.Join(dst, n))
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s keeps set-id bits: %v", n, fi.Mode())
		}
	}
}

func TestPrepareRules(t *testing.T) {
	dst := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dst, "file"), []byte("f"), 0o644))
	must(t, os.Mkdir(filepath.Join(dst, "dir"), 0o755))
	file := archive(t, ent{name: "s", typ: tar.TypeReg, body: "data"})
	put := func(dest string, p Place) error {
		tg, err := Prepare(Host(), dest, p)
		if err != nil {
			return err
		}
		if _, err := tg.Extract(bytes.NewReader(file.Bytes()), ExtractOptions{}); err != nil {
			tg.Discard()
			return err
		}
		return tg.Commit()
	}
	must(t, put(filepath.Join(dst, "dir"), Place{Base: "s", Overwrite: true}))     // into an existing dir
	must(t, put(filepath.Join(dst, "file"), Place{Base: "s", Overwrite: true}))    // over a file
	must(t, put(filepath.Join(dst, "new")+"/", Place{Base: "s", Overwrite: true})) // trailing slash: a dir
	for name, want := range map[string]string{"dir/s": "data", "file": "data", "new/s": "data"} {
		if b, _ := os.ReadFile(filepath.Join(dst, name)); string(b) != want {
			t.Errorf("%s = %q", name, b)
		}
	}
	if err := put(filepath.Join(dst, "file"), Place{Base: "s"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("no overwrite: %v", err)
	}
	if err := put(filepath.Join(dst, "file", "x"), Place{Base: "s", Overwrite: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("under a file: %v", err)
	}
	if err := put(filepath.Join(dst, "file"), Place{Overwrite: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("contents over a file: %v", err)
	}
}

func TestInRootResolvesSymlinksInsideRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must(t, os.Symlink("/", filepath.Join(root, "up")))
	must(t, os.Symlink(outside, filepath.Join(root, "abs")))
	must(t, os.MkdirAll(filepath.Join(root, outside), 0o755))
	d := InRoot(openDir(t, root))
	tg, err := Prepare(d, "/up/up/../abs/new/", Place{Base: "s", Overwrite: true})
	must(t, err)
	_, err = tg.Extract(archive(t, ent{name: "s", typ: tar.TypeReg, body: "x"}), ExtractOptions{})
	must(t, err)
	must(t, tg.Commit())
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("escaped the root: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(root, outside, "new", "s")); err != nil {
		t.Fatal(err)
	}
	// A source symlink followed resolves inside the root too.
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "ls")))
	if _, _, err := OpenSource(d, "/ls", true); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("followed out of the root: %v", err)
	}
	var sink bytes.Buffer
	dir, name, err := OpenSource(d, "/up/ls", false)
	must(t, err)
	defer dir.Close()
	_, err = Send(&sink, dir, name, SendOptions{Name: "ls"})
	must(t, err)
	h, err := tar.NewReader(&sink).Next()
	must(t, err)
	if h.Typeflag != tar.TypeSymlink {
		t.Fatalf("not sent as a symlink: %+v", h)
	}
	_, _ = io.Copy(io.Discard, &sink)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExtractDirect writes large files with O_DIRECT (or buffered, where
// the file system refuses it): byte-identical whatever their tail, modes
// and mtimes kept.
func TestExtractDirect(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} { // ext4 here; tmpfs may refuse O_DIRECT
		src, err := os.MkdirTemp(dir, "direct")
		must(t, err)
		defer os.RemoveAll(src)
		mt := time.Unix(1700000000, 5)
		sizes := map[string]int{"exact": 3 << 20, "tail": 1<<20 + 4096*3 + 123, "small": 5000, "odd": 2<<20 - 1}
		want := map[string][]byte{}
		for name, n := range sizes {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(i*7 + len(name))
			}
			want[name] = b
			must(t, os.WriteFile(filepath.Join(src, name), b, 0o640))
			must(t, os.Chtimes(filepath.Join(src, name), mt, mt))
		}
		var buf bytes.Buffer
		_, err = Send(&buf, openDir(t, src), ".", SendOptions{Direct: true})
		must(t, err)
		dst, err := os.MkdirTemp(dir, "direct-dst")
		must(t, err)
		defer os.RemoveAll(dst)
		st, err := Extract(&buf, openDir(t, dst), ExtractOptions{Direct: true})
		must(t, err)
		if st.Entries != int64(len(sizes)) {
			t.Fatalf("%s: extracted %+v", dir, st)
		}
		for name, b := range want {
			got, err := os.ReadFile(filepath.Join(dst, name))
			must(t, err)
			if !bytes.Equal(got, b) {
				t.Fatalf("%s: %s differs (%d bytes, want %d)", dir, name, len(got), len(b))
			}
			fi, _ := os.Stat(filepath.Join(dst, name))
			if fi.Mode() != 0o640 || !fi.ModTime().Equal(mt) {
				t.Errorf("%s: %s: mode %v mtime %v", dir, name, fi.Mode(), fi.ModTime())
			}
		}
	}
}

func TestAlignedBuffer(t *testing.T) {
	for i := 0; i < 8; i++ {
		b := AlignedBuffer(10000+i, 4096)
		if len(b) != 10000+i || uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
			t.Fatalf("buffer of %d at %p", len(b), &b[0])
		}
	}
}

// FirstIsDir tells a directory's archive from a file's (what Send makes,
// PAX headers first) without consuming it, and says no to garbage.
func TestFirstIsDir(t *testing.T) {
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "d", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "d", "sub", "f"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "empty"), nil, 0o644))
	for name, want := range map[string]bool{"d": true, "empty": false} {
		var buf bytes.Buffer
		if _, err := Send(&buf, openDir(t, src), name, SendOptions{Name: name}); err != nil {
			t.Fatal(err)
		}
		n := buf.Len()
		r := bufio.NewReader(&buf)
		if got := FirstIsDir(r); got != want {
			t.Errorf("%s: FirstIsDir %v, want %v", name, got, want)
		}
		if r.Buffered()+buf.Len() != n {
			t.Errorf("%s: FirstIsDir consumed the archive", name)
		}
	}
	if FirstIsDir(bufio.NewReader(strings.NewReader("not a tar archive"))) {
		t.Error("garbage is a directory")
	}
	if !IsDir(Host(), src) || IsDir(Host(), filepath.Join(src, "empty")) || IsDir(Host(), filepath.Join(src, "none")) {
		t.Error("IsDir")
	}
}
