package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
		"sh", "-c", "{ id -G; ulimit -Sn; ulimit -Hn; } > /tmp/init-ids; trap 'echo term; exit 7' TERM; while :; do sleep 0.2; done"); err != nil {
		t.Fatal(err)
	}
	defer ctr(context.Background(), "containers", "rm", "t2") //nolint:errcheck
	// The OCI process's additionalGids and rlimits (containerd's default
	// spec: the image's groups of root, 1024 open files where the box's
	// default hard limit is 4096), for the init and an exec. (Groups other
	// than the gid are shown by TestExecRoot in tests/integration.)
	info, err := ctr(ctx, "containers", "info", "t2")
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		Spec struct {
			Process struct {
				User struct {
					GID            uint32   `json:"gid"`
					AdditionalGids []uint32 `json:"additionalGids"`
				} `json:"user"`
				Rlimits []struct {
					Type       string `json:"type"`
					Soft, Hard uint64
				} `json:"rlimits"`
			} `json:"process"`
		} `json:"Spec"`
	}
	if err := json.Unmarshal([]byte(info.stdout), &ci); err != nil {
		t.Fatalf("containers info: %v", err)
	}
	p := ci.Spec.Process
	// id -G prints the gid, then the supplementary groups other than it, in order.
	wantIDs := []string{fmt.Sprint(p.User.GID)}
	for _, g := range p.User.AdditionalGids {
		if g != p.User.GID {
			wantIDs = append(wantIDs, fmt.Sprint(g))
		}
	}
	want := strings.Join(wantIDs, " ")
	for _, r := range p.Rlimits {
		if r.Type == "RLIMIT_NOFILE" {
			want += fmt.Sprintf("\n%d\n%d", r.Soft, r.Hard)
		}
	}
	if len(p.User.AdditionalGids) == 0 || !strings.Contains(want, "\n") {
		t.Fatalf("containerd's spec has no additionalGids or no RLIMIT_NOFILE: %+v", p)
	}
	for _, script := range []string{"until test -s /tmp/init-ids; do sleep 0.1; done; cat /tmp/init-ids", "id -G; ulimit -Sn; ulimit -Hn"} {
		r, err := ctr(ctx, "task", "exec", "--exec-id", "ids", "t2", "sh", "-c", script)
		if err != nil || strings.TrimSpace(r.stdout) != want {
			t.Fatalf("%s: %q (%v), want %q", script, r.stdout, err, want)
		}
	}
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
	// The task's metrics (cgroups v2, summed in the box): sh and its sleep.
	r, err = ctr(ctx, "task", "metrics", "--format", "json", "t2")
	var m struct {
		Pids struct{ Current uint64 }
		CPU  struct {
			UsageUsec uint64 `json:"usage_usec"`
		}
		Memory struct {
			Usage      uint64
			UsageLimit uint64 `json:"usage_limit"`
		}
	}
	if err != nil || json.Unmarshal([]byte(r.stdout), &m) != nil || m.Pids.Current == 0 || m.Memory.Usage == 0 ||
		m.Memory.UsageLimit < m.Memory.Usage || m.CPU.UsageUsec == 0 {
		t.Fatalf("task metrics: %q %v", r.stdout, err)
	}
	t.Logf("task metrics: %d processes, %d bytes resident, %d µs CPU", m.Pids.Current, m.Memory.Usage, m.CPU.UsageUsec)
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
		// The kernel's 15 bytes of containerd-shim-boxlite-v2, started for
		// t3 (containerd passes `-id t3`): a shim an earlier test left must
		// not be the one killed.
		args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if comm == "containerd-shim" && strings.Contains(string(args), "\x00-id\x00t3\x00") {
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
