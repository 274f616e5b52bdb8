//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

// attach opens a stream that resumes the detachable exec id.
func attach(t *testing.T, h *testhost.Host, id string) *testhost.Stream {
	t.Helper()
	s := h.Open(0)
	if err := s.Send(protocol.TAttach, protocol.Attach{ID: id}); err != nil {
		t.Fatal(err)
	}
	return s
}

// started reads a stream's Started frame and returns the pid.
func started(t *testing.T, s *testhost.Stream) int {
	t.Helper()
	f, err := s.Next(wait)
	if err != nil || f.Type != protocol.TStarted {
		t.Fatalf("want started, got %v %q %v", f.Type, f.Payload, err)
	}
	var st protocol.Started
	if err := protocol.Decode(f, &st); err != nil {
		t.Fatal(err)
	}
	return st.Pid
}

// A detachable exec outlives its stream: with nobody attached it keeps at
// most a window of output and then blocks; an attach gets every byte its
// first host did not credit, in order, and the exit.
func TestDetachedExecResumes(t *testing.T) {
	h, _ := serve(t, Config{})
	const n = 300000 // about 2 MB: far more than the window and a pipe
	want := append(seqOutput(n), "end\n"...)
	req := sh("seq 1 " + strconv.Itoa(n) + "; echo end; echo err >&2; exit 7")
	req.Detach = "job-1"
	s, err := h.Exec(req)
	if err != nil {
		t.Fatal(err)
	}
	pid := started(t, s)
	// Take a window without crediting, then credit part of it: the host
	// consumed those bytes; the rest it received but did not acknowledge.
	var got []byte
	for len(got) < protocol.InitialWindow {
		f, err := s.Next(wait)
		if err != nil || f.Type != protocol.TStdout {
			t.Fatalf("%v %v", f.Type, err)
		}
		got = append(got, f.Payload...)
	}
	const consumed = 100 << 10
	if err := s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: consumed}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}
	h.Forget(s)
	// Nobody reads: the process must be held back, not buffered.
	time.Sleep(500 * time.Millisecond)
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("pid %d is gone after its stream was cancelled: %v", pid, err)
	}
	a := attach(t, h, "job-1")
	// A second attach while the first holds it is refused.
	res, err := attach(t, h, "job-1").Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, errdefs.ErrAlreadyExists, "one at a time")
	res, err = a.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 7)
	if res.Pid != pid {
		t.Fatalf("attach reports pid %d, want %d", res.Pid, pid)
	}
	all := append(got[:consumed:consumed], res.Stdout...)
	if !bytes.Equal(all, want) || string(res.Stderr) != "err\n" {
		t.Fatalf("got %d bytes, want %d, equal prefix %d; stderr %q", len(all), len(want), commonPrefix(all, want), res.Stderr)
	}
	// Its exit went out on a stream: it is forgotten.
	res, err = attach(t, h, "job-1").Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, errdefs.ErrNotFound, "no exec job-1")
}

// Stdin, signals and detaching again work on an attached stream.
func TestDetachedExecStdinAndSignal(t *testing.T) {
	h, _ := serve(t, Config{})
	req := protocol.Exec{Argv: []string{"sh", "-c", `while read l; do echo "got $l"; done; echo eof; exec sleep 60`}, Env: testEnv, Stdin: true, Detach: "shell"}
	s, err := h.Exec(req)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s)
	line := func(s *testhost.Stream, in, out string) {
		t.Helper()
		if err := s.SendRaw(protocol.TStdin, []byte(in)); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := s.Next(wait)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type == protocol.TCredit {
				continue
			}
			if f.Type != protocol.TStdout || string(f.Payload) != out {
				t.Fatalf("got %v %q, want %q", f.Type, f.Payload, out)
			}
			s.Send(protocol.TCredit, protocol.Credit{Fd: 1, Bytes: len(f.Payload)})
			return
		}
	}
	line(s, "a\n", "got a\n")
	for i := range 2 { // detach and attach twice
		if err := s.Send(protocol.TCancel, nil); err != nil {
			t.Fatal(err)
		}
		h.Forget(s)
		s = attach(t, h, "shell")
		started(t, s)
		line(s, strconv.Itoa(i)+"\n", "got "+strconv.Itoa(i)+"\n")
	}
	if err := s.Send(protocol.TStdinClose, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(protocol.TSignal, protocol.Signal{Signal: int(unix.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit == nil || res.Exit.Signal != int(unix.SIGTERM) {
		t.Fatalf("exit %+v err %v, stdout %q", res.Exit, res.Err, res.Stdout)
	}
}

// An exec that ends detached keeps its exit and output for an attach; the
// agent keeps at most MaxDetachedExits of them, dropping the oldest.
func TestDetachedExitsAreBounded(t *testing.T) {
	h, _ := serve(t, Config{})
	dir := t.TempDir()
	var pids []int
	for i := range protocol.MaxDetachedExits + 1 {
		req := sh(fmt.Sprintf("while [ ! -e %s/go-%d ]; do sleep 0.05; done; echo done %d; exit %d", dir, i, i, i%100))
		req.Detach = "x" + strconv.Itoa(i)
		s, err := h.Exec(req)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, started(t, s))
		if err := s.Send(protocol.TCancel, nil); err != nil {
			t.Fatal(err)
		}
		h.Forget(s)
	}
	// They end one by one, detached, oldest first.
	deadline := time.Now().Add(wait)
	for i, pid := range pids {
		if err := os.WriteFile(fmt.Sprintf("%s/go-%d", dir, i), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for unix.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The agent sees the end of the output just after the process's.
	time.Sleep(300 * time.Millisecond)
	res, err := attach(t, h, "x0").Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, errdefs.ErrNotFound, "no exec x0")
	for i := 1; i < len(pids); i++ {
		res, err := attach(t, h, "x"+strconv.Itoa(i)).Collect(wait, true)
		if err != nil {
			t.Fatal(err)
		}
		wantExit(t, res, i%100)
		if string(res.Stdout) != fmt.Sprintf("done %d\n", i) {
			t.Fatalf("x%d: stdout %q", i, res.Stdout)
		}
	}
}

// Bad ids and reused ids are refused; an agent's end kills detached execs.
func TestDetachRefusals(t *testing.T) {
	h, _ := serve(t, Config{})
	res, err := attach(t, h, "../x").Collect(wait, true)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, errdefs.ErrInvalidArgument, "exec id")
	req := sh("exec sleep 60")
	req.Detach = "dup"
	s, err := h.Exec(req)
	if err != nil {
		t.Fatal(err)
	}
	pid := started(t, s)
	res = run(t, h, req)
	wantErr(t, res, errdefs.ErrAlreadyExists, "dup exists")
	req.Detach = string(bytes.Repeat([]byte("a"), protocol.MaxDetachID+1))
	res = run(t, h, req)
	wantErr(t, res, errdefs.ErrInvalidArgument, "exec id")
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}
	h.Forget(s)
	if err := h.Send(protocol.TShutdown, 0, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("detached pid %d outlived the agent's connection", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A detachable exec that ended attached is forgotten as its exit is sent:
// an attach right after the exit finds nothing (before, it could find the
// exec still in the tables and say another stream held it).
func TestAttachAfterAttachedExit(t *testing.T) {
	h, _ := serve(t, Config{})
	for i := range 30 {
		req := sh("exit 3")
		req.Detach = fmt.Sprintf("quick-%d", i)
		res := run(t, h, req)
		if res.Exit == nil || res.Exit.Code != 3 {
			t.Fatalf("run %d: %+v", i, res)
		}
		res, err := attach(t, h, req.Detach).Collect(wait, true)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, res, errdefs.ErrNotFound, "ended")
	}
}

// An attach that wants a live exec (Attach.Live) does not get one that
// ended while detached: the agent forgets it, and its id is free for a new
// exec (a named session starting its process again).
func TestAttachLiveForgetsTheEnded(t *testing.T) {
	h, _ := serve(t, Config{})
	req := sh("sleep 1; exit 5")
	req.Detach = "named-1"
	s, err := h.Exec(req)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s)
	if err := s.Send(protocol.TCancel, nil); err != nil {
		t.Fatal(err)
	}
	h.Forget(s)
	liveAttach := func() *testhost.Stream {
		a := h.Open(0)
		if err := a.Send(protocol.TAttach, protocol.Attach{ID: "named-1", Live: true}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	// It runs on, detached: a live attach takes it.
	a := liveAttach()
	started(t, a)
	if err := a.Send(protocol.TCancel, nil); err != nil { // detached again; it exits meanwhile
		t.Fatal(err)
	}
	h.Forget(a)
	deadline := time.Now().Add(wait)
	for {
		res, err := liveAttach().Collect(wait, true)
		if err != nil {
			t.Fatal(err)
		}
		if errors.Is(res.Err, errdefs.ErrNotFound) {
			break // ended and forgotten
		}
		if time.Now().After(deadline) {
			t.Fatalf("a live attach still finds the exec that ended: %+v", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The id is free again.
	req.Argv = []string{"/bin/sh", "-c", "exit 6"}
	res := run(t, h, req)
	if res.Exit == nil || res.Exit.Code != 6 {
		t.Fatalf("a new exec under the ended one's id: %+v", res)
	}
}
