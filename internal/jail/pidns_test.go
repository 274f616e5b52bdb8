package jail_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/jail"
)

// TestPIDNamespace runs two confined programs under the same uid (as two
// boxes would get if uids ever collided): each is pid 1 of a PID namespace
// of its own, so one cannot see or signal the other, which the uid alone
// would allow; both are still killed and reaped from outside.
func TestPIDNamespace(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	exe, _ := os.Executable()

	peer, err := jail.Command("", jail.Spec{
		Path: probePath, Args: []string{probePath, "sleep"}, UID: uid, GID: uid,
		Binds: []jail.Bind{{Host: exe, Inside: probePath}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer peer.Wait()
	defer peer.Process().Kill()
	if err := peer.Ready(); err != nil {
		t.Fatal(err)
	}
	peerPid := peer.Process().Pid
	if l := peer.Layers().PIDNS; !l.Applied {
		t.Fatalf("pid namespace not applied: %s", l.Note)
	}

	fd3r, fd3w, _ := os.Pipe()
	defer fd3r.Close()
	fd4r, fd4w, _ := os.Pipe()
	defer fd4w.Close()
	outR, outW, _ := os.Pipe()
	defer outR.Close()
	c := startJailed(t, jail.Spec{
		Path: probePath, Args: []string{probePath, "probe", "/tmp/ro", "/tmp"},
		Env: []string{"BOXLITE_TEST_PEER=" + strconv.Itoa(peerPid)},
		UID: uid, GID: uid, Binds: []jail.Bind{{Host: exe, Inside: probePath}},
		ExtraFiles: []*os.File{fd3w, fd4r}, Stdout: outW, Stderr: os.Stderr,
	}, fd3w, fd4r, outW)
	defer c.Process().Kill()
	if err := c.Ready(); err != nil {
		t.Fatal(err)
	}
	var r report
	if line := readLine(t, outR, 20*time.Second); json.Unmarshal([]byte(line), &r) != nil {
		t.Fatalf("probe report %q", line)
	}
	if r.UID != int(uid) {
		t.Fatalf("probe runs as uid %d, want %d (the peer's)", r.UID, uid)
	}
	if r.Pid != 1 {
		t.Errorf("the program is pid %d inside, want 1 (a PID namespace of its own)", r.Pid)
	}
	if !strings.Contains(r.KillPeer, "no such process") {
		t.Errorf("kill(%d, 0) of a program of the same uid in another jail: %q, want ESRCH", peerPid, r.KillPeer)
	}
	// From outside both are there, in namespaces of their own.
	if err := unix.Kill(peerPid, 0); err != nil {
		t.Errorf("the peer %d is gone: %v", peerPid, err)
	}
	ours, _ := os.Readlink("/proc/self/ns/pid")
	a, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", peerPid))
	b, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c.Process().Pid))
	if a == ours || b == ours || a == b || a == "" || b == "" {
		t.Errorf("pid namespaces: ours %s, the peer's %s, the probe's %s: want three", ours, a, b)
	}

	fd4w.Close() // the probe exits
	if err := waitTimeout(t, c, 20*time.Second); err != nil {
		t.Errorf("probe: %v", err)
	}
	peer.Process().Kill()
	if err := waitTimeout(t, peer, 20*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("peer after SIGKILL: %v", err)
	}
}
