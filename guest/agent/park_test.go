//go:build linux

package agent

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/protocol"
)

// parkReq parks e on a new stream and returns the TParked answer's pid.
func parkReq(t *testing.T, h *testhost.Host, e protocol.Exec) (int, error) {
	t.Helper()
	s := h.Open(0)
	defer h.Forget(s)
	if err := h.Send(protocol.TPark, s.ID, e); err != nil {
		t.Fatal(err)
	}
	f, err := s.Next(wait)
	if err != nil {
		t.Fatal(err)
	}
	switch f.Type {
	case protocol.TParked:
		var st protocol.Started
		if err := protocol.Decode(f, &st); err != nil {
			t.Fatal(err)
		}
		return st.Pid, nil
	case protocol.TError:
		var pe protocol.Error
		protocol.Decode(f, &pe)
		return 0, pe.Err()
	}
	t.Fatalf("answer to park: %s", f.Type)
	return 0, nil
}

func TestParkedProcessIsTakenOverByTheSameExec(t *testing.T) {
	h, _ := serve(t, Config{})
	req := protocol.Exec{Argv: []string{"sh", "-c", `echo ready; read x; echo "got $x"`}, Env: testEnv, Stdin: true}
	pid, err := parkReq(t, h, req)
	if err != nil || pid <= 0 {
		t.Fatalf("park: pid %d, %v", pid, err)
	}

	// Another request spawns its own process.
	other := req
	other.Env = append([]string{"X=1"}, testEnv...)
	res, err := h.Run(other, []byte("b\n"), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if res.Pid == pid || string(res.Stdout) != "ready\ngot b\n" {
		t.Fatalf("other request: pid %d (parked %d), stdout %q", res.Pid, pid, res.Stdout)
	}

	// The same request gets the parked process, with what it wrote while parked.
	res, err = h.Run(req, []byte("a\n"), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if res.Pid != pid || string(res.Stdout) != "ready\ngot a\n" {
		t.Fatalf("same request: pid %d (parked %d), stdout %q", res.Pid, pid, res.Stdout)
	}

	// Taken once: the next one spawns.
	res, err = h.Run(req, []byte("c\n"), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if res.Pid == pid {
		t.Fatalf("the parked process was handed out twice")
	}
}

func TestParkFailures(t *testing.T) {
	h, _ := serve(t, Config{})
	if _, err := parkReq(t, h, protocol.Exec{Argv: []string{"/no/such/binary"}, Env: testEnv}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing binary: %v", err)
	}
	_, err := parkReq(t, h, protocol.Exec{Argv: []string{"sh", "-c", "exit 3"}, Env: testEnv})
	if !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("process that exits: %v", err)
	}
	req := protocol.Exec{Argv: []string{"sleep", "30"}, Env: testEnv}
	for i := 0; i < maxParked; i++ {
		if _, err := parkReq(t, h, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := parkReq(t, h, req); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("park beyond the limit: %v", err)
	}
}

func TestParkedProcessThatDiedIsNotHandedOut(t *testing.T) {
	h, _ := serve(t, Config{})
	req := protocol.Exec{Argv: []string{"sh", "-c", "read x; echo $x"}, Env: testEnv, Stdin: true}
	pid, err := parkReq(t, h, req)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, run(t, h, protocol.Exec{Argv: []string{"kill", "-KILL", strconv.Itoa(pid)}}), 0)
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		if f, err := procStat(pid); err != nil || f[0] == "Z" {
			break // dead, reaped or not
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not die", pid)
		}
	}
	res, err := h.Run(req, []byte("z\n"), wait)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, 0)
	if res.Pid == pid || string(res.Stdout) != "z\n" {
		t.Fatalf("pid %d (dead parked %d), stdout %q", res.Pid, pid, res.Stdout)
	}
}
