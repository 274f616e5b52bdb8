//go:build linux && amd64

package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/seccomp"
)

// forkOn runs argv from g's forking thread through the reaper and returns
// its output and exit status.
func forkOn(t *testing.T, g *sandboxGen, argv ...string) (string, unix.WaitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	exited := make(chan unix.WaitStatus, 1)
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{0, w.Fd(), w.Fd()}}
	_, err = getReaper().spawn(func() (int, error) { return g.forkExec(argv[0], argv, attr) }, func(ws unix.WaitStatus) { exited <- ws })
	w.Close()
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	out, _ := io.ReadAll(r)
	select {
	case ws := <-exited:
		return string(out), ws
	case <-time.After(20 * time.Second):
		t.Fatalf("%q did not exit", argv)
	}
	return "", 0
}

// TestForkThread checks the forking thread model: one locked thread with
// the box's filter, capability bounding set and (as root) a PID namespace
// for its children forks processes that inherit all of it, while no other
// thread of the process does, even when the runtime has to create threads
// while that thread is busy. Without root it checks what it can (the
// filter, with no_new_privs).
func TestForkThread(t *testing.T) {
	prog := boxProg(t)
	root := os.Geteuid() == 0
	g := newSandboxGen()
	ready := make(chan error, 1)
	go g.forkThread(func() error {
		if root {
			if err := unix.Unshare(unix.CLONE_NEWPID); err != nil {
				return err
			}
			if err := limitCaps(unix.RawSyscall6, protocol.DefaultCaps); err != nil {
				return err
			}
		} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
		return seccomp.Install(prog, 0)
	}, ready)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !g.end(5 * time.Second) {
			t.Errorf("forking thread %d did not end", g.tid)
		}
	}()
	self, _ := os.Readlink("/proc/self/ns/pid")
	if root {
		// The first child is PID 1 of the new namespace; it must outlive
		// the others, or the namespace dies with it.
		r, w, _ := os.Pipe()
		attr := &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}}
		pid, err := getReaper().spawn(func() (int, error) {
			return g.forkExec("/bin/sh", []string{"sh", "-c", "echo $$; exec sleep 60"}, attr)
		}, func(unix.WaitStatus) {})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Kill(pid, unix.SIGKILL)
		line := make([]byte, 16)
		n, _ := r.Read(line)
		r.Close()
		if got := strings.TrimSpace(string(line[:n])); got != "1" {
			t.Fatalf("first child's pid in its namespace: %q", got)
		}
	}

	// Use up the runtime's threads with goroutines blocked in system calls,
	// so that waking goroutines from the forking thread needs new ones.
	block, unblock, _ := os.Pipe()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [1]byte
			syscall.Read(int(block.Fd()), b[:])
		}()
	}
	var mu sync.Mutex
	var outs []string
	var fwg sync.WaitGroup
	for range 8 {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			out, ws := forkOn(t, g, "/bin/sh", "-c", `echo pid $$; grep -E '^(Seccomp|NoNewPrivs|CapBnd|CapEff):' /proc/self/status`)
			if ws.ExitStatus() != 0 {
				t.Errorf("child exit %v: %s", ws, out)
			}
			mu.Lock()
			outs = append(outs, out)
			mu.Unlock()
		}()
	}
	fwg.Wait()
	for _, out := range outs {
		want := []string{"Seccomp:\t2\n"}
		if root {
			bnd := fmt.Sprintf("%016x", protocol.DefaultCaps)
			want = append(want, "CapBnd:\t"+bnd+"\n", "CapEff:\t"+bnd+"\n", "NoNewPrivs:\t0\n")
		} else {
			want = append(want, "NoNewPrivs:\t1\n")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("child status lacks %q:\n%s", w, out)
			}
		}
		if root && strings.HasPrefix(out, "pid 1\n") {
			t.Errorf("child is PID 1 of its namespace:\n%s", out)
		}
	}

	// Only the forking thread has the filter or another PID namespace for
	// its children.
	tasks, _ := filepath.Glob("/proc/self/task/*")
	filtered := 0
	for _, task := range tasks {
		b, err := os.ReadFile(task + "/status")
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "\nSeccomp:\t2\n") {
			filtered++
			if task != fmt.Sprintf("/proc/self/task/%d", g.tid) {
				t.Errorf("thread %s has the filter; the forking thread is %d", task, g.tid)
			}
		}
		if ns, err := os.Readlink(task + "/ns/pid_for_children"); root && err == nil && ns != self && task != fmt.Sprintf("/proc/self/task/%d", g.tid) {
			t.Errorf("thread %s forks into %s", task, ns)
		}
	}
	if filtered != 1 {
		t.Errorf("%d threads of %d have the filter, want 1", filtered, len(tasks))
	}
	t.Logf("%d threads", len(tasks))
	unblock.Close()
	wg.Wait()
	block.Close()

	g.shut()
	if _, err := g.forkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{}); err != errSandboxDown {
		t.Errorf("fork after stop: %v", err)
	}
}

func TestNsPid(t *testing.T) {
	pid, err := nsPid(os.Getpid(), -1)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("nsPid(self) = %d, %v", pid, err)
	}
	if _, err := nsPid(1<<30, -1); err == nil {
		t.Fatal("nsPid of no process")
	}
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatalf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	if pid, err := nsPid(1<<30, pidfd); err != nil || pid != os.Getpid() {
		t.Fatalf("nsPid through a pidfd = %d, %v; want %d", pid, err, os.Getpid())
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/trail\04`: `/trail\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
