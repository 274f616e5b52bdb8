package integration

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// mustCLI is cli for a command that must succeed.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("boxlite %q: exit %d: %s", args, code, errOut)
	}
	return out
}

// running reports whether pid is a live process (a zombie is not: a
// detached shim is reaped by whoever inherited it).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// statField is field i (0: state, 1: ppid, 2: pgrp, 3: session) of
// /proc/PID/stat after the command name.
func statField(t *testing.T, pid, i int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if i >= len(f) {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return f[i]
}

func awaitGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); running(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
	}
}

// The CLI's lifecycle, and a detached box across processes: `create` makes a
// configured box; `start` boots it and exits, and the box keeps running; an
// exec (another process) starts a background process and writes a RAM-only
// file; this process reattaches and sees both, as does a second CLI exec
// (the same VM, no reboot); exit codes pass through; `logs` shows the
// console; `stop` stops it; an exec on the stopped box starts it again (and
// it outlives that CLI too); `rm -f` ends it leaving no shim or VMM. Two boots.
func TestCLILifecycleAndDetach(t *testing.T) {
	const name = "cli-detached"
	id := strings.TrimSpace(mustCLI(t, "create", "--name", name, "--memory", "256", "alpine:latest"))
	t.Cleanup(func() { cli(t, "rm", "-f", name) })
	// ls is docker ps: a configured box only with -a; -q prints ids.
	if ls := mustCLI(t, "ls", "-a"); !strings.Contains(ls, id) || !strings.Contains(ls, "configured") {
		t.Fatalf("ls -a after create:\n%s", ls)
	}
	if ls := mustCLI(t, "ls"); strings.Contains(ls, id) {
		t.Fatalf("ls (running boxes) after create:\n%s", ls)
	}
	if ids := strings.Fields(mustCLI(t, "ls", "-aq")); !slices.Contains(ids, id) || slices.ContainsFunc(ids, func(s string) bool { return len(s) != 12 }) {
		t.Fatalf("ls -aq: %q, want ids only, %s among them", ids, id)
	}
	mustCLI(t, "start", name)
	if ids := strings.Fields(mustCLI(t, "ls", "-q")); !slices.Contains(ids, id) {
		t.Fatalf("ls -q after start: %q, want %s", ids, id)
	}
	out := mustCLI(t, "exec", name, "--", "sh", "-c", "echo in-ram > /dev/shm/mark; sleep 1000 >/dev/null 2>&1 & echo $!")
	sleepPid := strings.TrimSpace(out)

	ctx := context.Background()
	b, err := rt.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	bi := b.Info()
	if bi.State != boxlite.StateRunning || bi.Runtime == nil || !bi.Config.Detach {
		t.Fatalf("the box after its CLI start exited: %+v", bi)
	}
	shimPid, vmmPid := bi.Runtime.ShimPid, bi.Runtime.VMMPid
	// Its own session (and so process group): a terminal's SIGHUP or ^C to
	// whoever started it never reaches it.
	if sid := statField(t, shimPid, 3); sid != strconv.Itoa(shimPid) {
		t.Errorf("shim %d is in session %s, want its own", shimPid, sid)
	}
	res := runIn(t, b, sh("cat /dev/shm/mark; kill -0 "+sleepPid+" && echo alive"))
	if string(res.Stdout) != "in-ram\nalive\n" {
		t.Fatalf("reattached: %q %q; want the RAM file and the background process (the same VM)", res.Stdout, res.Stderr)
	}
	if out := mustCLI(t, "exec", name, "--", "cat", "/dev/shm/mark"); out != "in-ram\n" {
		t.Fatalf("second CLI exec: %q", out)
	}
	if _, _, code := cli(t, "exec", name, "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exec exit code %d, want 7", code)
	}
	if _, _, code := cli(t, "exec", name, "--", "sh", "-c", "kill -9 $$"); code != 128+9 {
		t.Errorf("exec killed by SIGKILL: exit %d, want 137", code)
	}
	if _, _, code := cli(t, "exec", "no-such-box", "--", "true"); code != 125 {
		t.Errorf("exec into a missing box: exit %d, want 125", code)
	}
	if logs := mustCLI(t, "logs", name); !strings.Contains(logs, "boxlite-agent: ready") {
		t.Errorf("logs lack the console's agent line:\n%s", logs)
	}

	mustCLI(t, "stop", name)
	awaitGone(t, "shim", shimPid)
	if ls := mustCLI(t, "ls", "-a"); !strings.Contains(ls, "stopped") {
		t.Fatalf("ls -a after stop:\n%s", ls)
	}
	if ids := strings.Fields(mustCLI(t, "ls", "-q")); slices.Contains(ids, id) {
		t.Fatalf("ls -q after stop: %q lists the stopped box", ids)
	}
	if out := mustCLI(t, "exec", name, "--", "sh", "-c", "cat /dev/shm/mark 2>/dev/null; echo booted"); out != "booted\n" {
		t.Errorf("exec on the stopped box: %q (a RAM file survived the stop?)", out)
	}
	if b, err = rt.Get(ctx, name); err != nil { // Get joins the box another process started
		t.Fatal(err)
	}
	bi = b.Info()
	if bi.State != boxlite.StateRunning || bi.Runtime == nil || bi.Runtime.ShimPid == shimPid {
		t.Fatalf("exec on the stopped box did not start it again, or it died with that CLI: %+v", bi)
	}
	shimPid, vmmPid2 := bi.Runtime.ShimPid, bi.Runtime.VMMPid
	awaitGone(t, "first VMM", vmmPid)

	mustCLI(t, "rm", "-f", name)
	awaitGone(t, "shim", shimPid)
	awaitGone(t, "VMM", vmmPid2)
	if _, err := os.Stat(bi.Dir); !os.IsNotExist(err) {
		t.Errorf("box dir left after rm -f: %v", err)
	}
}

// A detached auto-remove box is removed when it stops, whoever stops it:
// Stop (the client and the shim both remove it), or its VMM dying with no
// client at all (its shim removes it). Two boxes, booted at once.
func TestDetachedAutoRemove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	boxes := make([]*boxlite.Box, 2)
	errs := make(chan error, 2)
	for i := range boxes {
		go func() {
			b, err := rt.Create(ctx, "alpine:latest", boxlite.WithDetach(), boxlite.WithAutoRemove(true), boxlite.WithMemoryMiB(256))
			if err == nil {
				err = b.Start(ctx)
			}
			boxes[i] = b
			errs <- err
		}()
	}
	for range boxes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	stopped, killed := boxes[0], boxes[1]
	if err := stopped.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if s := stopped.State(); s != boxlite.StateRemoved {
		t.Errorf("after stop: %s, want removed", s)
	}
	info := killed.Info()
	if err := syscall.Kill(info.Runtime.VMMPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, "shim", info.Runtime.ShimPid)
	for _, dir := range []string{stopped.Info().Dir, info.Dir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("box dir %s left: %v", dir, err)
		}
	}
	if _, err := rt.Get(ctx, killed.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the killed auto-remove box: %v; want not found", err)
	}
}
