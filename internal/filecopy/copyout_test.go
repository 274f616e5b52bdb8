package filecopy

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// copyOut does what core's CopyOut does with a stream: Prepare on the
// destination resolved through no symlink, Extract, Commit.
func copyOut(dest string, p Place, stream []byte, opt ExtractOptions) error {
	tg, err := Prepare(HostNoSymlinks(), dest, p)
	if err != nil {
		return err
	}
	if _, err := tg.Extract(bytes.NewReader(stream), opt); err != nil {
		tg.Discard()
		return err
	}
	return tg.Commit()
}

// TestCopyOutRefusesPlantedSymlinks: a box's symlink, copied out as a link
// by one copy, is refused by every later copy whose destination goes through
// it (into it, into a directory under it, its contents, a new name under
// it), and so is a symlink the user made; nothing lands where they point.
func TestCopyOutRefusesPlantedSymlinks(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "home", ".ssh") // what the box wants to write
	must(t, os.MkdirAll(filepath.Join(outside, "sub"), 0o700))
	dst := filepath.Join(top, "dst")
	must(t, os.Mkdir(dst, 0o755))

	// The first copy out: the box's /data is a symlink to the host path.
	planted := archive(t, ent{name: "data", typ: tar.TypeSymlink, link: outside}).Bytes()
	must(t, copyOut(filepath.Join(dst, "data"), Place{Base: "data", Overwrite: true}, planted, ExtractOptions{}))
	if l, err := os.Readlink(filepath.Join(dst, "data")); err != nil || l != outside {
		t.Fatalf("the first copy left %q, %v", l, err)
	}
	must(t, os.Symlink(outside, filepath.Join(dst, "mine"))) // one the user made

	key := archive(t, ent{name: "authorized_keys", typ: tar.TypeReg, body: "ssh-ed25519 AAAA box"}).Bytes()
	keyDir := archive(t, ent{name: "data", typ: tar.TypeDir}, ent{name: "data/authorized_keys", typ: tar.TypeReg, body: "x"}).Bytes()
	contents := archive(t, ent{name: "authorized_keys", typ: tar.TypeReg, body: "x"}).Bytes()
	for _, c := range []struct {
		dest, link string
		p          Place
		stream     []byte
	}{
		{dst + "/data", dst + "/data", Place{Base: "data", Overwrite: true}, keyDir},                         // into it
		{dst + "/data/", dst + "/data", Place{Base: "data", Overwrite: true}, keyDir},                        // into it, as a directory
		{dst + "/data", dst + "/data", Place{Overwrite: true}, contents},                                     // its contents
		{dst + "/data/sub", dst + "/data", Place{Base: "authorized_keys", Overwrite: true}, key},             // a directory under it
		{dst + "/data/new/x", dst + "/data", Place{Base: "authorized_keys", Overwrite: true}, key},           // new directories under it
		{dst + "/data/authorized_keys", dst + "/data", Place{Base: "authorized_keys", Overwrite: true}, key}, // a new name under it
		{dst + "/mine", dst + "/mine", Place{Base: "data", Overwrite: true}, keyDir},                         // the user's
		{dst + "/mine/sub/new/", dst + "/mine", Place{Base: "authorized_keys", Overwrite: true}, key},
	} {
		err := copyOut(c.dest, c.p, c.stream, ExtractOptions{})
		var se *SymlinkError
		if !errors.As(err, &se) || !errors.Is(err, errdefs.ErrInvalidArgument) || se.Link != c.link ||
			!strings.Contains(err.Error(), c.link+" is a symlink") {
			t.Errorf("copy out to %s: %v; want a SymlinkError naming %s", c.dest, err, c.link)
		}
	}
	var found []string
	filepath.Walk(outside, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != outside && p != filepath.Join(outside, "sub") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Fatalf("written through the symlink: %v", found)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 2 {
		t.Errorf("dst holds %v", ents)
	}

	// A relative destination resolves from the working directory, alike.
	t.Chdir(dst)
	if err := copyOut("data/sub", Place{Base: "authorized_keys", Overwrite: true}, key, ExtractOptions{}); !errors.As(err, new(*SymlinkError)) {
		t.Errorf("relative destination: %v", err)
	}
	// Without a symlink in the way, directories are made as before.
	must(t, copyOut("made/a/b/", Place{Base: "authorized_keys", Overwrite: true}, key, ExtractOptions{}))
	if b, err := os.ReadFile(filepath.Join(dst, "made", "a", "b", "authorized_keys")); err != nil || len(b) == 0 {
		t.Errorf("made/a/b: %q, %v", b, err)
	}
}

// TestCopyOutMasksModes: modes from the stream lose the umask's bits, as
// files the caller made itself would (0777 and 0666 from a box are not
// left writable by others).
func TestCopyOutMasksModes(t *testing.T) {
	stream := archive(t,
		ent{name: "x/", typ: tar.TypeDir, mode: 0o777},
		ent{name: "x/sticky/", typ: tar.TypeDir, mode: 0o1777},
		ent{name: "x/exe", typ: tar.TypeReg, body: "e", mode: 0o777},
		ent{name: "x/rw", typ: tar.TypeReg, body: "w", mode: 0o666},
		ent{name: "x/suid", typ: tar.TypeReg, body: "s", mode: 0o4777},
		ent{name: "x/private", typ: tar.TypeReg, body: "p", mode: 0o600},
	).Bytes()
	for _, c := range []struct {
		umask uint32
		want  map[string]os.FileMode
	}{
		{0o022, map[string]os.FileMode{"": 0o755 | os.ModeDir, "sticky": 0o755 | os.ModeDir | os.ModeSticky,
			"exe": 0o755, "rw": 0o644, "suid": 0o755, "private": 0o600}},
		{0o077, map[string]os.FileMode{"": 0o700 | os.ModeDir, "sticky": 0o700 | os.ModeDir | os.ModeSticky,
			"exe": 0o700, "rw": 0o600, "suid": 0o700, "private": 0o600}},
		{0, map[string]os.FileMode{"": 0o777 | os.ModeDir, "sticky": 0o777 | os.ModeDir | os.ModeSticky,
			"exe": 0o777, "rw": 0o666, "suid": 0o777, "private": 0o600}},
	} {
		dst := filepath.Join(t.TempDir(), "out")
		must(t, copyOut(dst, Place{Base: "x", Overwrite: true}, stream, ExtractOptions{Umask: c.umask}))
		for name, want := range c.want {
			fi, err := os.Lstat(filepath.Join(dst, name))
			must(t, err)
			if fi.Mode() != want {
				t.Errorf("umask %#o: %s has mode %v, want %v", c.umask, name, fi.Mode(), want)
			}
		}
	}
}

func TestUmask(t *testing.T) {
	for in, want := range map[string]uint32{
		"Name:\tx\nUmask:\t0027\nState:\tR (running)\n": 0o027,
		"Umask:\t0000\n": 0,
		"Name:\tx\n":     DefaultUmask, // a kernel before 4.7
		"Umask:\tzz\n":   DefaultUmask,
	} {
		if got := parseUmask([]byte(in)); got != want {
			t.Errorf("parseUmask(%q) = %#o, want %#o", in, got, want)
		}
	}
	// The process's own, as the kernel reports it (set here only to know it).
	old := unix.Umask(0o037)
	got := Umask()
	unix.Umask(old)
	if got != 0o037 {
		t.Errorf("Umask() = %#o, want 0o037", got)
	}
}
