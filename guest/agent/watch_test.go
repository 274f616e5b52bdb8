//go:build linux

package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

type watchRec struct {
	op   protocol.WatchOp
	name string
}

// watchRecords reads a watch stream's records until want says it has
// them all, crediting as it goes; the stream's last frame, if it came, is
// returned too.
func watchRecords(t *testing.T, s *testhost.Stream, want func([]watchRec) bool) ([]watchRec, *protocol.Frame) {
	t.Helper()
	var recs []watchRec
	var buf []byte
	deadline := time.Now().Add(wait)
	for !want(recs) {
		f, err := s.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("watch: %v (so far %v)", err, recs)
		}
		if f.Type != protocol.TStdout {
			return recs, &f
		}
		s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)})
		buf = append(buf, f.Payload...)
		for len(buf) >= 3 {
			n := int(buf[1])<<8 | int(buf[2])
			if len(buf) < 3+n {
				break
			}
			recs = append(recs, watchRec{protocol.WatchOp(buf[0]), string(buf[3 : 3+n])})
			buf = buf[3+n:]
		}
	}
	return recs, nil
}

func has(recs []watchRec, op protocol.WatchOp, name string) bool {
	for _, r := range recs {
		if r.op == op && r.name == name {
			return true
		}
	}
	return false
}

func TestWatch(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "w")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "old"), 0o755))
	h, _ := serve(t, Config{Root: root})

	// A missing directory, a file: errors, no watch.
	for p, kind := range map[string]error{"/nope": errdefs.ErrNotFound, "/w/f": errdefs.ErrInvalidArgument} {
		if p == "/w/f" {
			must(os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
		}
		s := h.Open(0)
		must(s.Send(protocol.TWatch, protocol.Watch{Path: p}))
		f, err := s.Next(wait)
		must(err)
		if _, err := endOf(t, f); !errors.Is(err, kind) {
			t.Errorf("watch %s: %v, want %v", p, err, kind)
		}
		h.Forget(s)
	}
	must(os.Remove(filepath.Join(dir, "f")))

	s := h.Open(0)
	must(s.Send(protocol.TWatch, protocol.Watch{Path: "/w", Recursive: true}))
	if _, last := watchRecords(t, s, func(r []watchRec) bool { return len(r) > 0 && r[0].op == 0 }); last != nil { // started
		_, err := endOf(t, *last)
		t.Fatalf("watch /w: %v", err)
	}
	must(os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644))
	must(os.Chmod(filepath.Join(dir, "a"), 0o600))
	must(os.Mkdir(filepath.Join(dir, "new"), 0o755))
	time.Sleep(100 * time.Millisecond) // the new directory's watch is added on its event
	must(os.WriteFile(filepath.Join(dir, "new", "b"), []byte("y"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "old", "c"), []byte("z"), 0o644))
	must(os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "a2")))
	must(os.Remove(filepath.Join(dir, "a2")))
	wants := []watchRec{{protocol.WatchCreate, "a"}, {protocol.WatchWrite, "a"}, {protocol.WatchChmod, "a"},
		{protocol.WatchCreate, "new"}, {protocol.WatchCreate, "new/b"}, {protocol.WatchCreate, "old/c"},
		{protocol.WatchRename, "a"}, {protocol.WatchCreate, "a2"}, {protocol.WatchRemove, "a2"}}
	recs, last := watchRecords(t, s, func(r []watchRec) bool {
		for _, w := range wants {
			if !has(r, w.op, w.name) {
				return false
			}
		}
		return true
	})
	if last != nil {
		t.Fatalf("the watch ended: %v (records %v)", last.Type, recs)
	}
	// The directory itself going ends the watch cleanly.
	must(os.RemoveAll(dir))
	recs, last = watchRecords(t, s, func([]watchRec) bool { return false })
	if last == nil || last.Type != protocol.TCopyDone {
		t.Fatalf("after the directory went: %v, records %v", last, recs)
	}
	h.Forget(s)

	// A cancelled watch ends without a last frame, and its slot is free.
	must(os.MkdirAll(dir, 0o755))
	s = h.Open(0)
	must(s.Send(protocol.TWatch, protocol.Watch{Path: "/w"}))
	watchRecords(t, s, func(r []watchRec) bool { return len(r) > 0 })
	must(s.Send(protocol.TCancel, nil))
	h.Forget(s)
	deadline := time.Now().Add(wait)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled watch is still registered")
		}
		// A new watch on the same directory works.
		s = h.Open(0)
		must(s.Send(protocol.TWatch, protocol.Watch{Path: "/w"}))
		if recs, _ := watchRecords(t, s, func(r []watchRec) bool { return len(r) > 0 }); len(recs) > 0 {
			break
		}
	}
}
