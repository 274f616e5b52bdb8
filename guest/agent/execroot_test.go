//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// makeIn makes what is missing inside the root, and a symlink in the
// root never takes it outside.
func TestMakeIn(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	if _, err := makeIn(root, "/dangling/x", false); err == nil {
		t.Error("made a path through a dangling symlink")
	}
	if err := os.MkdirAll(root+outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    string
		file bool
		want string
	}{
		{"/a/b/c", false, "/a/b/c"},
		{"/etc/hosts", true, "/etc/hosts"},
		{"/escape/x", false, outside + "/x"}, // the link resolves inside root: root + outside's path
		{"/up/y", true, "/y"},
	} {
		got, err := makeIn(root, c.p, c.file)
		if err != nil {
			t.Fatalf("%s: %v", c.p, err)
		}
		if got != root+c.want {
			t.Errorf("%s: %s, want %s", c.p, got, root+c.want)
		}
		fi, err := os.Stat(got)
		if err != nil || fi.IsDir() == c.file {
			t.Errorf("%s: made %v %v", c.p, fi, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made %v outside the root", ents)
	}
}

func TestCheckRootBinds(t *testing.T) {
	ok := protocol.Exec{Root: "/r", RootBinds: []protocol.RootBind{{Source: "/s", Target: "/t"}}}
	if err := checkRootBinds(&ok); err != nil {
		t.Fatal(err)
	}
	for _, req := range []protocol.Exec{
		{RootBinds: []protocol.RootBind{{Source: "/s", Target: "/t"}}},
		{Root: "/r", RootBinds: []protocol.RootBind{{Source: "rel", Target: "/t"}}},
		{Root: "/r", RootBinds: []protocol.RootBind{{Source: "/s", Target: "/"}}},
		{Root: "/r", RootBinds: make([]protocol.RootBind, protocol.MaxRootBinds+1)},
	} {
		if err := checkRootBinds(&req); !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrLimit) {
			t.Errorf("%+v: %v", req, err)
		}
	}
	for _, r := range []string{"rel", "/", "/..", ""} {
		if r == "" {
			continue
		}
		if err := checkRoot(r); err == nil {
			t.Errorf("root %q accepted", r)
		}
	}
}
