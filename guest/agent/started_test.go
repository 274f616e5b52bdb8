//go:build linux

package agent

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

// writeLog records, for each Write the agent makes on its channel, the
// types of the frames it carries (every write holds whole frames).
type writeLog struct {
	net.Conn
	mu     sync.Mutex
	writes [][]protocol.Type
}

func (w *writeLog) Write(p []byte) (int, error) {
	var types []protocol.Type
	for b := p; len(b) >= protocol.HeaderSize; {
		n := int(binary.BigEndian.Uint32(b[:4]))
		types = append(types, protocol.Type(b[4]))
		b = b[min(len(b), protocol.HeaderSize+n):]
	}
	w.mu.Lock()
	w.writes = append(w.writes, types)
	w.mu.Unlock()
	return w.Conn.Write(p)
}

// writesOf is the writes that carried a Started or Exit frame.
func (w *writeLog) writesOf() [][]protocol.Type {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out [][]protocol.Type
	for _, t := range w.writes {
		for _, x := range t {
			if x == protocol.TStarted || x == protocol.TExit {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

func serveLogged(t *testing.T) (*testhost.Host, *writeLog) {
	t.Helper()
	agentSide, hostSide := net.Pipe()
	log := &writeLog{Conn: agentSide}
	done := make(chan error, 1)
	go func() {
		done <- Serve(log, Config{Root: "/", Logf: t.Logf, Hello: protocol.Hello{Version: protocol.Version, Agent: "test"}})
	}()
	h := testhost.New(hostSide)
	t.Cleanup(func() {
		hostSide.Close()
		agentSide.Close()
		<-done
	})
	if _, err := h.Hello(wait); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return h, log
}

// A process that exits at once sends Started with its Exit, in one write.
func TestQuickExitStartedAndExitInOneWrite(t *testing.T) {
	h, log := serveLogged(t)
	res := run(t, h, protocol.Exec{Argv: []string{"true"}})
	wantExit(t, res, 0)
	if res.Pid <= 0 {
		t.Fatalf("no pid: %+v", res)
	}
	got := log.writesOf()
	if len(got) != 1 || len(got[0]) != 2 || got[0][0] != protocol.TStarted || got[0][1] != protocol.TExit {
		t.Fatalf("writes with started or exit: %v, want one [started exit]", got)
	}
}

// A quiet process that runs on reports its pid within startedHold, and
// output takes the held Started frame along ahead of it.
func TestStartedNotHeldPastItsHold(t *testing.T) {
	h, _ := serveLogged(t)
	s, err := h.Exec(protocol.Exec{Argv: []string{"sleep", "2"}, Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("first frame %v %v, want started", f.Type, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("started after %v of a running process", d)
	}
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}

	s, err = h.Exec(sh("echo hi; sleep 2"))
	if err != nil {
		t.Fatal(err)
	}
	f, err = s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("first frame %v %v, want started", f.Type, err)
	}
	if f, err = s.Next(wait); err != nil || f.Type != protocol.TStdout || string(f.Payload) != "hi\n" {
		t.Fatalf("second frame %v %q %v, want stdout", f.Type, f.Payload, err)
	}
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}
}
