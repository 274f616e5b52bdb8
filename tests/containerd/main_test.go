// Package containerd runs boxlite's containerd shim (containerd-shim-boxlite-v2)
// under a real containerd (Debian's, from `make setup`), started by the
// test with its own root, state, sockets and config, and drives it with
// containerd's own clients (ctr, and crictl for CRI).
package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
)

// env is the test's containerd and what it needs.
var env struct {
	dir     string       // everything of the test's own
	sock    string       // containerd's grpc socket
	bin     string       // the shim binary's directory, on containerd's PATH
	home    string       // BOXLITE_HOME of the shims
	guestKR string       // the guest kernel's release, from the assets
	bridge  string       // the CNI bridge of the test's pods (cni_test.go)
	bridge2 string       // and of their second network
	subnet2 netip.Prefix // its addresses
	subnet  netip.Prefix // its pods' addresses
	subnet6 netip.Prefix // and their IPv6 ones (dual stack)
	cmd     *exec.Cmd
	log     *bytes.Buffer
}

const namespace = "boxlite-test"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Printf("FAIL: "+format+"\n", args...)
		return 1
	}
	image, assets := os.Getenv("BOXLITE_TEST_IMAGE"), os.Getenv("BOXLITE_ASSETS")
	if image == "" || assets == "" {
		return fail("these tests need BOXLITE_TEST_IMAGE and BOXLITE_ASSETS; run them with `make test-go`")
	}
	if os.Geteuid() != 0 {
		return fail("containerd and its shims need root")
	}
	for _, tool := range []string{"containerd", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fail("%s is not installed (`make setup` installs Debian's containerd)", tool)
		}
	}
	// Orphaned shims (they leave containerd's process group) become ours,
	// so that the tests can tell what is left.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("subreaper: %v", err)
	}
	dir, err := os.MkdirTemp("", "bxctd")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	env.dir, env.sock, env.bin, env.home = dir, filepath.Join(dir, "c.sock"), filepath.Join(dir, "bin"), filepath.Join(dir, "home")
	if b, err := os.ReadFile(filepath.Join(assets, "guest", "kernel", "kernel.version")); err == nil {
		env.guestKR = strings.Fields(string(b) + " ")[0]
	}
	repo, _ := filepath.Abs("../..")
	build := exec.Command("go", "build", "-o", filepath.Join(env.bin, "containerd-shim-boxlite-v2"), "./cmd/containerd-shim-boxlite-v2")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return fail("build the shim: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := boxlite.NewRuntime(boxlite.WithHome(env.home))
	if err != nil {
		return fail("%v", err)
	}
	_, err = rt.Images().Load(ctx, image)
	rt.Close()
	if err != nil {
		return fail("load the box image: %v", err)
	}
	if err := writeCNIConfig(); err != nil {
		return fail("%v", err)
	}
	defer exec.Command("ip", "link", "del", env.bridge).Run()  //nolint:errcheck
	defer exec.Command("ip", "link", "del", env.bridge2).Run() //nolint:errcheck
	if err := startContainerd(); err != nil {
		return fail("%v", err)
	}
	defer stopContainerd()
	if _, err := ctr(ctx, "images", "import", image); err != nil {
		return fail("import %s: %v", image, err)
	}
	code := m.Run()
	if code != 0 {
		fmt.Printf("--- containerd's log (tail):\n%s\n", tail(env.log.String(), 6000))
	}
	return code
}

const config = `version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "%[1]s/c.sock"
[ttrpc]
  address = "%[1]s/c.sock.ttrpc"
[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/pause:boxlite-test"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.boxlite]
    runtime_type = "io.containerd.boxlite.v2"
    pod_annotations = ["io.boxlite.*"]
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni"
    max_conf_num = 2
`

func startContainerd() error {
	cfg := filepath.Join(env.dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(config, env.dir)), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(env.dir, "cni"), 0o755); err != nil {
		return err
	}
	env.log = &bytes.Buffer{}
	cmd := exec.Command("containerd", "--config", cfg)
	cmd.Env = append(os.Environ(), "PATH="+env.bin+":"+os.Getenv("PATH"), "BOXLITE_HOME="+env.home,
		"BOXLITE_K8S_STATE="+filepath.Join(env.dir, "k8s"))
	cmd.Stdout, cmd.Stderr = env.log, env.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	env.cmd = cmd
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := ctr(ctx, "version")
		cancel()
		if err == nil {
			return nil
		}
	}
	stopContainerd()
	return fmt.Errorf("containerd did not answer within 30 s:\n%s", tail(env.log.String(), 4000))
}

func stopContainerd() {
	if env.cmd == nil {
		return
	}
	_ = env.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = env.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = env.cmd.Process.Kill()
		<-done
	}
	env.cmd = nil
}

// result is a client command's outcome.
type result struct {
	stdout, stderr string
	code           int
}

// ctr runs ctr against the test's containerd; an error for a non-zero exit.
func ctr(ctx context.Context, args ...string) (result, error) {
	return client(ctx, "ctr", append([]string{"--address", env.sock, "--namespace", namespace}, args...)...)
}

func client(ctx context.Context, name string, args ...string) (result, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), err, r.stdout, r.stderr)
	}
	return r, nil
}

// descendants lists this test's descendant processes other than
// containerd (orphans are ours: the test is a subreaper), by command name.
func descendants() map[int]string {
	parent := map[int]int{}
	comm := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		comm[pid] = s[strings.IndexByte(s, '(')+1 : i]
	}
	me, skip := os.Getpid(), 0
	if env.cmd != nil {
		skip = env.cmd.Process.Pid
	}
	out := map[int]string{}
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == skip || pid == skip {
				break
			}
			if p == me {
				out[pid] = comm[pid]
				break
			}
		}
	}
	return out
}

// rssMiB sums the resident memory of pids (kB in /proc/PID/status).
func rssMiB(pids map[int]string) float64 {
	kb := 0
	for pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				n, _ := strconv.Atoi(f[1])
				kb += n
			}
		}
	}
	return float64(kb) / 1024
}

// awaitNothingLeft waits until no shim, VMM or other helper of the test's
// is left, and no box in the shims' home.
func awaitNothingLeft(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := descendants()
		boxes, _ := filepath.Glob(filepath.Join(env.home, "boxes", "*"))
		if len(left) == 0 && len(boxes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after %s: processes %v, boxes %v", within, left, boxes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
