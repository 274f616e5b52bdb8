//go:build linux

package agent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// agentCopyIn sends archive on a copy-in stream within the window and
// returns the copy's end.
func agentCopyIn(t *testing.T, h *testhost.Host, req protocol.CopyIn, archive []byte) (protocol.CopyDone, error) {
	t.Helper()
	s := h.Open(0)
	defer h.Forget(s)
	if err := s.Send(protocol.TCopyIn, req); err != nil {
		t.Fatal(err)
	}
	inFlight := 0
	next := func() (protocol.Frame, bool) {
		f, err := s.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == protocol.TCredit {
			var c protocol.Credit
			if err := protocol.Decode(f, &c); err != nil || c.Fd != 0 || c.Bytes > inFlight {
				t.Fatalf("bad credit %+v (%d in flight): %v", c, inFlight, err)
			}
			inFlight -= c.Bytes
			return f, false
		}
		return f, true
	}
	var last protocol.Frame
	ended := false
	for len(archive) > 0 && !ended {
		for inFlight+protocol.MaxChunk > protocol.InitialWindow && !ended {
			last, ended = next()
		}
		n := min(len(archive), protocol.MaxChunk)
		if err := s.SendRaw(protocol.TStdin, archive[:n]); err != nil {
			t.Fatal(err)
		}
		inFlight += n
		archive = archive[n:]
	}
	if !ended {
		s.Send(protocol.TStdinClose, nil)
	}
	for !ended {
		last, ended = next()
	}
	return endOf(t, last)
}

func endOf(t *testing.T, f protocol.Frame) (protocol.CopyDone, error) {
	t.Helper()
	var d protocol.CopyDone
	switch f.Type {
	case protocol.TCopyDone:
		return d, protocol.Decode(f, &d)
	case protocol.TError:
		var e protocol.Error
		if err := protocol.Decode(f, &e); err != nil {
			t.Fatal(err)
		}
		return d, e.Err()
	}
	t.Fatalf("unexpected %s frame", f.Type)
	return d, nil
}

// agentCopyOut reads a copy-out stream, crediting as it goes.
func agentCopyOut(t *testing.T, h *testhost.Host, req protocol.CopyOut) ([]byte, error) {
	t.Helper()
	s := h.Open(0)
	defer h.Forget(s)
	if err := s.Send(protocol.TCopyOut, req); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for {
		f, err := s.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != protocol.TStdout {
			_, err := endOf(t, f)
			return out.Bytes(), err
		}
		out.Write(f.Payload)
		s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)})
	}
}

func TestCopyInAndOutResolveInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	// The box's own symlinks: absolute ones resolve inside its root.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, outside), 0o755))
	must(os.Symlink(outside, filepath.Join(root, "dest")))
	h, _ := serve(t, Config{Root: root})

	src := t.TempDir()
	must(os.MkdirAll(filepath.Join(src, "tree", "sub"), 0o755))
	data := bytes.Repeat([]byte("x"), 1<<20+7)
	must(os.WriteFile(filepath.Join(src, "tree", "sub", "f"), data, 0o751))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "tree", "l")))
	var ar bytes.Buffer
	d, _ := filecopy.Host().OpenDir(src, false)
	if _, err := filecopy.Send(&ar, d, "tree", filecopy.SendOptions{Name: "tree"}); err != nil {
		t.Fatal(err)
	}
	d.Close()

	done, err := agentCopyIn(t, h, protocol.CopyIn{Dest: "/dest", Name: "tree", Overwrite: true}, ar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if done.Entries != 4 || done.Bytes != int64(len(data)) {
		t.Fatalf("done %+v", done)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("copy in left the root: %v", ents)
	}
	got, err := os.ReadFile(filepath.Join(root, outside, "tree", "sub", "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copied file: %v", err)
	}

	out, err := agentCopyOut(t, h, protocol.CopyOut{Src: "dest/tree"})
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	tg, err := filecopy.Prepare(filecopy.Host(), filepath.Join(dst, "back"), filecopy.Place{Base: "tree", Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Extract(bytes.NewReader(out), filecopy.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	must(tg.Commit())
	got, _ = os.ReadFile(filepath.Join(dst, "back", "sub", "f"))
	fi, _ := os.Stat(filepath.Join(dst, "back", "sub", "f"))
	if !bytes.Equal(got, data) || fi.Mode() != 0o751 {
		t.Fatalf("round trip: %d bytes, mode %v", len(got), fi.Mode())
	}

	// A followed symlink resolves in the box too: /etc/passwd of the root.
	if _, err := agentCopyOut(t, h, protocol.CopyOut{Src: "/dest/tree/l", Follow: true}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("followed out of the root: %v", err)
	}
	if _, err := agentCopyOut(t, h, protocol.CopyOut{Src: "/missing"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing source: %v", err)
	}
	if _, err := agentCopyIn(t, h, protocol.CopyIn{Dest: "/dest", Name: "tree"}, ar.Bytes()); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("no overwrite: %v", err)
	}
	// A broken archive fails and leaves nothing beside the destination.
	if _, err := agentCopyIn(t, h, protocol.CopyIn{Dest: "/new", Name: "tree", Overwrite: true}, ar.Bytes()[:len(ar.Bytes())/2]); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("truncated archive: %v", err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 2 { // tmp and dest
		t.Fatalf("root holds %v", ents)
	}
}
