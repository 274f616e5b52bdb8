package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// boxProcesses lists the processes of a box: its shim (its command line
// names the box's config) and every process whose command line names the
// box directory, plus the pids its last run reported, if still alive.
func boxProcesses(dir string, pids ...int) []string {
	var left []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			left = append(left, "process "+p.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	for _, pid := range pids {
		if alive(pid) {
			left = append(left, "pid "+strconv.Itoa(pid)+" of the box's last run")
		}
	}
	return left
}

// A paused box has no process; another runtime sees it paused and resumes
// it by name as the same machine: a process it ran goes on with the same
// pid, a file in /tmp is there, the boot id is the same, uptime went on
// from where it was, the clock is the host's; an exec on a paused box
// resumes it; a detachable exec left running across the pause is
// attached after it.
func TestPauseResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	home := os.Getenv("BOXLITE_TEST_HOME")
	rt1, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	b1, err := boxtest.CreateStarted(ctx, rt1, "alpine:latest", boxlite.WithDetach(), boxlite.WithName("pause-me"), boxlite.WithAutoRemove(false))
	if err != nil {
		rt1.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), "pause-me", true) })
	res := runIn(t, b1, boxlite.Command{Argv: []string{"sh", "-c",
		`echo 42 > /tmp/f; (x=42; while :; do sleep 1; done) </dev/null >/dev/null 2>&1 & echo $!; cat /proc/sys/kernel/random/boot_id; cut -d' ' -f1 /proc/uptime`}})
	before := strings.Fields(string(res.Stdout))
	if len(before) != 3 {
		t.Fatalf("box said %q", res.Stdout)
	}
	// A detachable exec that waits for a file, then prints.
	x, err := b1.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", `while [ ! -e /tmp/go ]; do sleep 0.2; done; echo went; exit 7`}, Detachable: true})
	if err != nil {
		t.Fatal(err)
	}
	xid := x.ID()
	info := b1.Info()
	dir, shimPid, vmmPid := info.Dir, info.Runtime.ShimPid, info.Runtime.VMMPid

	p, err := b1.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("paused: state %d bytes, saved in %.0f ms", p.StateBytes, p.SaveMs)
	if s := b1.State(); s != boxlite.StatePaused {
		t.Fatalf("state after Pause: %s", s)
	}
	if left := boxProcesses(dir, shimPid, vmmPid); len(left) > 0 {
		t.Fatalf("a paused box has processes: %q", left)
	}
	if fi, err := os.Stat(filepath.Join(dir, shimapi.StateFile)); err != nil || fi.Size() == 0 || fi.Size() > int64(info.Config.MemoryMiB)<<20+shimapi.PauseOverheadBytes {
		t.Fatalf("state file: %v, %v", fi, err)
	}
	if _, err := b1.Pause(ctx); err != nil {
		t.Fatalf("pause of a paused box: %v", err)
	}
	rt1.Close() // the process that made it is gone, as far as the box knows

	rt2, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	list, err := rt2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, bi := range list {
		if bi.Name == "pause-me" {
			found = true
			if bi.State != boxlite.StatePaused || bi.Paused == nil || bi.Paused.StateBytes == 0 {
				t.Fatalf("List from another runtime: %+v", bi)
			}
		}
	}
	if !found {
		t.Fatal("List from another runtime has no pause-me")
	}
	b2, err := rt2.Get(ctx, "pause-me")
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if b2.State() != boxlite.StateRunning || b2.Info().Runtime.Start != "resume" {
		t.Fatalf("after Resume: %+v", b2.Info())
	}
	if _, err := os.Stat(filepath.Join(dir, shimapi.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state was not consumed by the resume: %v", err)
	}
	res = runIn(t, b2, boxlite.Command{Argv: []string{"sh", "-c",
		`kill -0 ` + before[0] + ` && cat /tmp/f /proc/sys/kernel/random/boot_id && cut -d' ' -f1 /proc/uptime && date +%s`}})
	after := strings.Fields(string(res.Stdout))
	if len(after) != 4 || after[0] != "42" || after[1] != before[1] {
		t.Fatalf("after the resume the box said %q (before: pid %s, boot id %s)", res.Stdout, before[0], before[1])
	}
	up0, _ := strconv.ParseFloat(before[2], 64)
	up1, _ := strconv.ParseFloat(after[2], 64)
	if up1 < up0 {
		t.Fatalf("uptime went from %v to %v: the box booted again", up0, up1)
	}
	if guest, _ := strconv.ParseInt(after[3], 10, 64); guest < resumed.Unix()-1 {
		t.Fatalf("the guest's clock says %d, the host's was %d at the resume: it kept the time of the pause", guest, resumed.Unix())
	}
	// The detachable exec runs on: attach, let it finish.
	x2, err := b2.AttachExec(ctx, xid)
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, b2, boxlite.Command{Argv: []string{"touch", "/tmp/go"}})
	out, _ := io.ReadAll(x2.Stdout)
	if st, err := x2.Wait(ctx); err != nil || st.Code != 7 || string(out) != "went\n" {
		t.Fatalf("the detachable exec after the resume: %q, %+v, %v", out, st, err)
	}

	// An exec on a paused box resumes it.
	if _, err := b2.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	res = runIn(t, b2, boxlite.Command{Argv: []string{"sh", "-c", "kill -0 " + before[0] + " && cat /proc/sys/kernel/random/boot_id"}})
	if strings.TrimSpace(string(res.Stdout)) != before[1] || b2.State() != boxlite.StateRunning {
		t.Fatalf("exec on a paused box: %q, state %s", res.Stdout, b2.State())
	}

	// A state saved by another QEMU is refused with its typed error, the
	// box is then stopped with its disk, and a start boots it.
	if _, err := b2.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, shimapi.PausedFile)
	var pr shimapi.Paused
	data, err := os.ReadFile(rec)
	if err != nil || json.Unmarshal(data, &pr) != nil {
		t.Fatalf("pause record: %v", err)
	}
	pr.Compat.QEMUVersion = "6.0.0 (another build)"
	data, _ = json.Marshal(pr)
	if err := os.WriteFile(rec, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = b2.Resume(ctx)
	if !errors.Is(err, boxlite.ErrStateIncompatible) || !errors.Is(err, errdefs.ErrUnsupported) || !strings.Contains(err.Error(), "6.0.0") {
		t.Fatalf("resume of a state of another QEMU: %v; want ErrStateIncompatible naming the QEMU", err)
	}
	if s := b2.State(); s != boxlite.StateStopped {
		t.Fatalf("after a refused resume the box is %s, want stopped", s)
	}
	for _, f := range []string{shimapi.StateFile, shimapi.PausedFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is left after a refused resume: %v", f, err)
		}
	}
	if err := b2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res = runIn(t, b2, boxlite.Command{Argv: []string{"sh", "-c", "cat /proc/sys/kernel/random/boot_id; cat /tmp/f 2>&1"}})
	if got := strings.Fields(string(res.Stdout)); len(got) == 0 || got[0] == before[1] || b2.Info().Runtime.Start != "boot" {
		t.Fatalf("cold start after a refused resume: %q, %+v", res.Stdout, b2.Info().Runtime)
	}
}

// A box with volumes refuses to pause (QEMU 7.2 cannot save virtio-fs) and
// runs on; Stop of a paused box drops its state.
func TestPauseRefusedWithVolumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	host := t.TempDir()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithVolume(host, "/data", false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	_, err = b.Pause(ctx)
	if !errors.Is(err, errdefs.ErrUnsupported) || !strings.Contains(err.Error(), "volumes") {
		t.Fatalf("pause of a box with volumes: %v, want ErrUnsupported naming volumes", err)
	}
	if s := b.State(); s != boxlite.StateRunning {
		t.Fatalf("after a refused pause the box is %s", s)
	}
	runIn(t, b, boxlite.Command{Argv: []string{"true"}})
}

// A Python session's interpreter outlives a pause of its box: its variables
// and an open file are there after the resume, which the session's next
// cell makes (same pid); the session did not restart it.
func TestPythonSessionSurvivesPause(t *testing.T) {
	needPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	s, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(code string) boxlite.CellResult {
		t.Helper()
		r, err := s.Run(ctx, code, 2*time.Minute)
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		if r.Error != nil || r.Restarted {
			t.Fatalf("run %q: %+v", code, r)
		}
		return r
	}
	run("x = 42\nf = open('/tmp/notes', 'w+')\nf.write('kept open')\nf.flush()\nimport os")
	pid := s.Pid()
	if _, err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if b.State() != boxlite.StatePaused {
		t.Fatalf("state %s", b.State())
	}
	r := run("f.seek(0)\nprint(x, f.read(), os.getpid())")
	if got := strings.TrimSpace(string(r.Stdout)); got != "42 kept open "+strconv.Itoa(pid) {
		t.Fatalf("after pause and resume the session printed %q (pid before %d)", got, pid)
	}
	if b.State() != boxlite.StateRunning || b.Info().Runtime.Start != "resume" {
		t.Fatalf("the cell did not resume the box: %+v", b.Info())
	}
}

// The CLI pauses and resumes a box: ls shows it paused, exec resumes it.
func TestCLIPauseResume(t *testing.T) {
	id := strings.TrimSpace(mustCLI(t, "create", "--rm", "alpine:latest"))
	t.Cleanup(func() { cli(t, "rm", "-f", id) })
	mustCLI(t, "exec", id, "sh", "-c", "echo kept > /tmp/k")
	mustCLI(t, "pause", id)
	if out := mustCLI(t, "ls"); !strings.Contains(out, id) || !strings.Contains(out[strings.Index(out, id):], "paused") {
		t.Fatalf("ls after pause:\n%s", out)
	}
	mustCLI(t, "resume", id)
	mustCLI(t, "pause", id)
	if out := mustCLI(t, "exec", id, "cat", "/tmp/k"); out != "kept\n" {
		t.Fatalf("exec on the paused box printed %q", out)
	}
	if _, errOut, code := cli(t, "resume", "no-such-box"); code == 0 {
		t.Fatalf("resume of no box: exit 0 (%s)", errOut)
	}
}

// A published port and the box's way out come back with a resume (a new
// network stack); while paused, the port is closed.
func TestPauseKeepsNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithPorts(boxlite.Port{HostPort: port, GuestPort: 8080}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	runIn(t, b, boxlite.Command{Argv: []string{"sh", "-c",
		"mkdir -p /tmp/w && echo from-the-box > /tmp/w/index.html && (httpd -f -p 8080 -h /tmp/w </dev/null >/dev/null 2>&1 &)"}})
	get := func() (string, error) {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	getSoon := func(what string) {
		t.Helper()
		var last error
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			got, err := get()
			if err == nil && got == "from-the-box\n" {
				return
			}
			last = fmt.Errorf("%q, %v", got, err)
		}
		t.Fatalf("%s: the published port answers %v", what, last)
	}
	getSoon("before the pause")
	if _, err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := get(); err == nil {
		t.Fatalf("a paused box's port answered %q", got)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	getSoon("after the resume")
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from-the-host") }))
	defer host.Close()
	hp := host.Listener.Addr().(*net.TCPAddr).Port
	res := runIn(t, b, boxlite.Command{Argv: []string{"wget", "-q", "-O-", fmt.Sprintf("http://host.boxlite.internal:%d/", hp)}})
	if string(res.Stdout) != "from-the-host" {
		t.Fatalf("the resumed box reached the host with %q (exit %d, %s)", res.Stdout, res.Code, res.Stderr)
	}
}
