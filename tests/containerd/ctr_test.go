package containerd

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCtrRun runs a container to its exit: its output, its exit code, the
// guest's kernel (not the host's) and its own root.
func TestCtrRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := ctr(ctx, "images", "tag", "--force", "docker.io/library/alpine:latest", "alpine:latest"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := ctr(ctx, "run", "--rm", "--runtime", "io.containerd.boxlite.v2", "alpine:latest", "t1",
		"sh", "-c", "uname -r; echo hi; test -e /var/lib/boxlite/containers || echo own-root; grep -q eth0 /proc/net/dev || echo no-nic; exit 3")
	if r.code != 3 {
		t.Fatalf("ctr run exited %d, want 3 (%v)", r.code, err)
	}
	t.Logf("ctr run: %.1f s", time.Since(start).Seconds())
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	host := unix.ByteSliceToString(uts.Release[:])
	// Its own network namespace (ctr's default): the box has no NIC.
	if len(lines) != 4 || lines[1] != "hi" || lines[2] != "own-root" || lines[3] != "no-nic" {
		t.Fatalf("output %q", r.stdout)
	}
	if lines[0] == host {
		t.Fatalf("uname -r says the host's kernel %q", host)
	}
	if env.guestKR != "" && lines[0] != env.guestKR {
		t.Errorf("uname -r %q, want the guest kernel's %q", lines[0], env.guestKR)
	}
	awaitNothingLeft(t, 30*time.Second)
}

// TestCtrExecKill execs into a running container on the host's network
// (the box has a NIC), then kills it.
func TestCtrExecKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := ctr(ctx, "run", "-d", "--net-host", "--runtime", "io.containerd.boxlite.v2", "docker.io/library/alpine:latest", "t2",
		"sh", "-c", "trap 'echo term; exit 7' TERM; while :; do sleep 0.2; done"); err != nil {
		t.Fatal(err)
	}
	defer ctr(context.Background(), "containers", "rm", "t2") //nolint:errcheck
	r, err := ctr(ctx, "task", "exec", "--exec-id", "e1", "t2", "sh", "-c", "echo in-exec; id -u; grep -q eth0 /proc/net/dev && echo nic; exit 5")
	if r.code != 5 || strings.TrimSpace(r.stdout) != "in-exec\n0\nnic" {
		t.Fatalf("exec: code %d stdout %q (%v)", r.code, r.stdout, err)
	}
	// On a terminal (script(1) gives ctr one): the process's stdio is a
	// pseudo-terminal in the box, sized as ctr's.
	tr, err := client(ctx, "script", "-qec", "stty cols 91 rows 17; ctr --address "+env.sock+" --namespace "+namespace+
		" task exec -t --exec-id e2 t2 sh -c 'tty; stty size; echo tty-ok'", "/dev/null")
	if err != nil || !strings.Contains(tr.stdout, "/dev/pts/") || !strings.Contains(tr.stdout, "17 91") || !strings.Contains(tr.stdout, "tty-ok") {
		t.Fatalf("exec -t: %q %v", tr.stdout, err)
	}
	r, err = ctr(ctx, "task", "ls")
	if err != nil || !strings.Contains(r.stdout, "RUNNING") {
		t.Fatalf("task ls: %q %v", r.stdout, err)
	}
	if _, err := ctr(ctx, "task", "kill", "-s", "SIGTERM", "t2"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, _ = ctr(ctx, "task", "ls")
		if strings.Contains(r.stdout, "STOPPED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not stopped 30 s after SIGTERM: %q", r.stdout)
		}
	}
	if _, err := ctr(ctx, "task", "rm", "t2"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctr(ctx, "containers", "rm", "t2"); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 30*time.Second)
}

// TestCtrShimKilled kills a task's shim: the task ends (containerd reports
// its exit), the box goes with the shim, and containerd's cleanup
// (`containerd-shim-boxlite-v2 delete`) leaves nothing.
func TestCtrShimKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := ctr(ctx, "run", "-d", "--runtime", "io.containerd.boxlite.v2", "docker.io/library/alpine:latest", "t3", "sleep", "1000"); err != nil {
		t.Fatal(err)
	}
	defer ctr(context.Background(), "containers", "rm", "t3") //nolint:errcheck
	shim := 0
	for pid, comm := range descendants() {
		if comm == "containerd-shim" { // the kernel's 15 bytes of containerd-shim-boxlite-v2
			shim = pid
		}
	}
	if shim == 0 {
		t.Fatalf("no shim among %v", descendants())
	}
	if err := unix.Kill(shim, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, _ := ctr(ctx, "task", "ls")
		if !strings.Contains(r.stdout, "t3") || strings.Contains(r.stdout, "STOPPED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still listed as running 60 s after its shim was killed: %q", r.stdout)
		}
	}
	ctr(ctx, "task", "rm", "-f", "t3") //nolint:errcheck // containerd may have removed it already
	if _, err := ctr(ctx, "containers", "rm", "t3"); err != nil {
		t.Fatal(err)
	}
	awaitNothingLeft(t, 60*time.Second)
}
