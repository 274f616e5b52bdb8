package boxlite

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/boxlite/boxlite/internal/protocol"
)

// A copy out whose local half fails (a hostile archive) fails, even when
// the box's TCopyDone lands while the host is cancelling: the box ending
// cleanly must not turn a refused archive into success.
func TestCopyAbandonRacingCopyDone(t *testing.T) {
	host, box := net.Pipe()
	defer box.Close()
	c := &conn{c: host, w: protocol.NewWriter(host), streams: map[uint32]handler{}, detach: map[uint32]bool{}, next: 1, done: make(chan struct{})}
	defer c.Close()
	s := newCopyStream(c, "copy out /x -> /tmp/x")
	s.recv = newWindow(func(int) {})
	go func() {
		r := protocol.NewReader(box)
		if _, err := r.ReadFrame(); err != nil { // TCopyOut
			return
		}
		// The TCancel: its write cannot return before all of it is read, so
		// the box's TCopyDone is handled while the host is still sending.
		var hdr [protocol.HeaderSize]byte
		if _, err := io.ReadFull(box, hdr[:1]); err != nil {
			return
		}
		done, _ := protocol.Encode(protocol.TCopyDone, s.id, protocol.CopyDone{})
		s.frame(done)
		io.ReadFull(box, hdr[1:])
	}()
	if _, err := c.open(s, protocol.TCopyOut, protocol.CopyOut{Src: "/x"}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused: absolute path")
	if err := s.run(context.Background(), func() error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("run: %v; want the local failure", err)
	}
}
