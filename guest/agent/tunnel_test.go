//go:build linux

package agent

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// TestTunnel: a tunnel connects to a port on loopback, carries bytes both
// ways within the windows, passes each side's half-close, and ends with
// an exit once both are done; a port where nothing listens is unreachable.
func TestTunnel(t *testing.T) {
	h, _ := serve(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: several windows each way
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		got, err := io.ReadAll(c) // until the host half-closes
		if err == nil && !bytes.Equal(got, big) {
			err = io.ErrShortBuffer
		}
		if err == nil {
			_, err = c.Write(big) // then answer, and close
		}
		served <- err
	}()
	s := h.Open(0)
	if err := s.Send(protocol.TTunnel, protocol.Tunnel{Port: ln.Addr().(*net.TCPAddr).Port}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Next(wait); err != nil || f.Type != protocol.TStarted {
		t.Fatalf("first frame %v %v", f.Type, err)
	}
	// Send within the window, as the credit comes back.
	credit := protocol.InitialWindow
	var out bytes.Buffer
	sent, eof, closed := 0, false, false
	for {
		for !closed && credit > 0 && sent < len(big) {
			n := min(credit, protocol.MaxChunk, len(big)-sent)
			if err := s.SendRaw(protocol.TStdin, big[sent:sent+n]); err != nil {
				t.Fatal(err)
			}
			sent += n
			credit -= n
		}
		if sent == len(big) && !closed {
			s.Send(protocol.TStdinClose, nil)
			closed = true
		}
		f, err := s.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case protocol.TCredit:
			var c protocol.Credit
			protocol.Decode(f, &c)
			credit += c.Bytes
		case protocol.TStdout:
			if eof {
				t.Fatal("data after eof")
			}
			out.Write(f.Payload)
			s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)})
		case protocol.TEOF:
			eof = true
		case protocol.TExit:
			if !eof || !bytes.Equal(out.Bytes(), big) {
				t.Fatalf("exit with eof %v and %d bytes", eof, out.Len())
			}
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			goto refused
		default:
			t.Fatalf("unexpected %s frame", f.Type)
		}
	}
refused:
	addr := ln.Addr().String()
	ln.Close()
	_, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	s = h.Open(0)
	s.Send(protocol.TTunnel, protocol.Tunnel{Port: port})
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TError {
		t.Fatalf("closed port: %v %v", f.Type, err)
	}
	var e protocol.Error
	protocol.Decode(f, &e)
	if e.Kind != string(errdefs.KindUnreachable) {
		t.Fatalf("closed port: %+v", e)
	}
	// A bad port is refused.
	s = h.Open(0)
	s.Send(protocol.TTunnel, protocol.Tunnel{Port: 70000})
	if f, err := s.Next(wait); err != nil || f.Type != protocol.TError {
		t.Fatalf("bad port: %v %v", f.Type, err)
	}
}
