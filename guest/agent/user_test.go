//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

func TestResolveUser(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(`# comment
root:x:0:0:root:/root:/bin/sh
alice:x:1000:1000:Alice:/home/alice:/bin/sh
bob:x:1001:100::/home/bob:/bin/sh
broken line
`), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc", "group"), []byte(`root:x:0:
users:x:100:alice
alice:x:1000:
wheel:x:10:alice,bob
docker:x:999:bob
`), 0o644))
	for _, tc := range []struct {
		spec     string
		uid, gid uint32
		groups   []uint32
		home     string
	}{
		{"", 0, 0, nil, "/root"},
		{"root", 0, 0, nil, "/root"},
		{"alice", 1000, 1000, []uint32{100, 10}, "/home/alice"},
		{"1001", 1001, 100, []uint32{10, 999}, "/home/bob"},
		{"bob:wheel", 1001, 10, nil, "/home/bob"},
		{"alice:42", 1000, 42, nil, "/home/alice"},
		{"4242", 4242, 0, nil, "/"},
		{"4242:4243", 4242, 4243, nil, "/"},
	} {
		got, err := resolveUser(root, tc.spec)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if got.Uid != tc.uid || got.Gid != tc.gid || !slices.Equal(got.Groups, tc.groups) || got.Home != tc.home {
			t.Errorf("%q: got %+v, want %d:%d %v %s", tc.spec, got, tc.uid, tc.gid, tc.groups, tc.home)
		}
	}
	for spec, kind := range map[string]error{
		"carol":        errdefs.ErrNotFound,
		"alice:nogrp":  errdefs.ErrNotFound,
		":1":           errdefs.ErrInvalidArgument,
		"alice:":       errdefs.ErrInvalidArgument,
		"4294967295":   errdefs.ErrNotFound, // (uid_t)-1 is not a uid, so it is a name
		"99999999999x": errdefs.ErrNotFound,
	} {
		if _, err := resolveUser(root, spec); !errors.Is(err, kind) {
			t.Errorf("%q: got %v, want %v", spec, err, kind)
		}
	}
	// No /etc/passwd: numeric ids still work, names do not.
	empty := t.TempDir()
	if got, err := resolveUser(empty, "7:8"); err != nil || got.Uid != 7 || got.Gid != 8 {
		t.Errorf("no passwd: %+v %v", got, err)
	}
	if _, err := resolveUser(empty, "alice"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("no passwd, by name: %v", err)
	}
}

func TestResolveInStaysInRoot(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(root, "a", "b", "f"), nil, 0o644))
	must(os.Symlink("/a", filepath.Join(root, "abs")))
	must(os.Symlink("../../../../..", filepath.Join(root, "a", "up")))
	must(os.Symlink("b/f", filepath.Join(root, "a", "rel")))
	must(os.Symlink("loop", filepath.Join(root, "loop")))
	for in, want := range map[string]string{
		"/abs/b/f":          "/a/b/f",
		"abs/../a/b/f":      "/a/b/f",
		"/../../a/b/f":      "/a/b/f",
		"/a/up/a/b/f":       "/a/b/f",
		"/a/up":             "/",
		"/a/rel":            "/a/b/f",
		"/a/./b/../b/f":     "/a/b/f",
		"/abs/up/abs/b/../": "/a",
	} {
		got, err := resolveIn(root, in)
		if err != nil || got != filepath.Join(root, want) {
			t.Errorf("%s: got %q %v, want %s", in, got, err, want)
		}
	}
	if _, err := resolveIn(root, "/loop"); err == nil {
		t.Error("symlink loop resolved")
	}
	if _, err := resolveIn(root, "/a/b/f/x"); err == nil {
		t.Error("path through a file resolved")
	}
	if _, err := resolveIn(root, "/nope"); !os.IsNotExist(err) {
		t.Errorf("missing: %v", err)
	}
}

// The parsed /etc/passwd is kept while the file stays the same, and read
// again once it changes; a file changed within dbSettle is not kept, as a
// rewrite of the same size in the same clock tick would look unchanged.
func TestUserDBCache(t *testing.T) {
	root := t.TempDir()
	passwd := filepath.Join(root, "etc", "passwd")
	if err := os.MkdirAll(filepath.Dir(passwd), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(passwd, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := func() string {
		t.Helper()
		who, err := resolveUser(root, "app")
		if err != nil {
			t.Fatal(err)
		}
		return who.Home
	}
	cached := func() bool {
		dbs.mu.Lock()
		defer dbs.mu.Unlock()
		_, ok := dbs.m[passwd]
		return ok
	}
	write("app:x:1000:1000::/home/one:/bin/sh\n")
	if home() != "/home/one" || cached() {
		t.Fatalf("a file changed just now: home %q, cached %v", home(), cached())
	}

	defer func(d time.Duration) { dbSettle = d }(dbSettle)
	dbSettle = 0
	if home() != "/home/one" || !cached() {
		t.Fatalf("a settled file: home %q, cached %v", home(), cached())
	}
	write("app:x:1000:1000::/home/second:/bin/sh\n") // another size
	if got := home(); got != "/home/second" {
		t.Fatalf("after a change: home %q", got)
	}
	if err := os.Rename(passwd, passwd+".old"); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveUser(root, "app"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("after the file went: %v", err)
	}
}

// A database larger than maxCachedDBSize is read each time, never kept.
func TestUserDBCacheSkipsLargeFiles(t *testing.T) {
	defer func(d time.Duration) { dbSettle = d }(dbSettle)
	dbSettle = 0
	root := t.TempDir()
	passwd := filepath.Join(root, "etc", "passwd")
	if err := os.MkdirAll(filepath.Dir(passwd), 0o755); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("#"+strings.Repeat("x", 1023)+"\n", maxCachedDBSize/1024+1) + "app:x:7:7::/h:/bin/sh\n"
	if err := os.WriteFile(passwd, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if who, err := resolveUser(root, "app"); err != nil || who.Uid != 7 {
		t.Fatalf("%+v, %v", who, err)
	}
	dbs.mu.Lock()
	_, kept := dbs.m[passwd]
	dbs.mu.Unlock()
	if kept {
		t.Fatalf("a %d-byte file was cached (limit %d)", len(big), maxCachedDBSize)
	}
}
