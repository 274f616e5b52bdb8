package serve

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stalledServer accepts one connection on ln and writes to it until a
// write times out (its client reads nothing), then waits until the
// client's bytes sit unread in its socket, and closes. It sends how much
// it wrote; it closes the channel without a value when it failed.
func stalledServer(t *testing.T, ln net.Listener) <-chan int64 {
	t.Helper()
	out := make(chan int64, 1)
	go func() {
		defer close(out)
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		var n int64
		buf := make([]byte, 32<<10)
		for {
			c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			k, err := c.Write(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		if err := waitUnread(c.(*lingerConn).TCPConn); err != nil {
			t.Error(err)
			return
		}
		if err := c.Close(); err != nil {
			t.Error(err)
			return
		}
		out <- n
	}()
	return out
}

// waitUnread waits (10 s at most) until c's socket holds bytes not read.
func waitUnread(c *net.TCPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		var ierr error
		if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
			return err
		}
		switch {
		case ierr != nil:
			return ierr
		case n > 0:
			return nil
		case time.Now().After(deadline):
			return errors.New("the client's bytes never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitSlotsFree(t *testing.T, ln *lingerListener) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(ln.slots) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still lingering", len(ln.slots))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLingeringClose: a server that gives up on a client that stopped
// reading, and closes while bytes the client sent meanwhile sit unread in
// its socket, still delivers everything it wrote: the client reads it all,
// then the end, and no reset. (A plain close answers with a reset that
// drops the megabytes in flight: the REST attach's lost output.)
func TestLingeringClose(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLingerListener(raw)
	defer ln.Close()
	written := stalledServer(t, ln)
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("a ping the server never reads")); err != nil {
		t.Fatal(err)
	}
	n, ok := <-written
	if !ok {
		t.FailNow()
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.Copy(io.Discard, c)
	if err != nil || got != n {
		t.Fatalf("the client read %d of the %d bytes written, then %v", got, n, err)
	}
	c.Close()
	waitSlotsFree(t, ln) // the drain ends with the client's close
}

// TestLingeringEndsWithTheListener: a client that neither reads nor
// closes holds a drain only until the server stops (its listener closes).
func TestLingeringEndsWithTheListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLingerListener(raw)
	written := stalledServer(t, ln)
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-written; !ok {
		t.FailNow()
	}
	if len(ln.slots) != 1 {
		t.Fatalf("%d connections lingering, want 1", len(ln.slots))
	}
	ln.Close()
	waitSlotsFree(t, ln)
}
