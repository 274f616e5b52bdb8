package jail_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/jail"
)

const testCgroupPrefix = "boxlite-jailtest-"

func TestProbe(t *testing.T) {
	p := jail.Probe()
	for _, l := range p.All() {
		t.Logf("%-18s applied=%-5v %s", l.Name, l.Applied, l.Note)
	}
	if os.Geteuid() == 0 && !p.UID.Applied {
		t.Errorf("root caller, but Probe says no uid drop: %s", p.UID.Note)
	}
	if !p.NoNewPrivs.Applied || !p.Rlimits.Applied {
		t.Errorf("no_new_privs and rlimits are always available: %+v", p)
	}
	if s := p.String(); s != "" && !strings.HasPrefix(s, "jail: ") {
		t.Errorf("String: %q", s)
	}
}

// readLine reads one line from r within d.
func readLine(t *testing.T, r io.Reader, d time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ch <- line
	}()
	select {
	case line := <-ch:
		return line
	case <-time.After(d):
		t.Fatalf("no line within %v", d)
		return ""
	}
}

// cgroupFile is a cgroup file of pid's group for controller ctrl, found
// through /proc/<pid>/cgroup and the mount table (v1 first, then v2).
func cgroupFile(t *testing.T, pid int, ctrl, file string) string {
	t.Helper()
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var v1, v2 string
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-")
		if i < 0 || i+3 >= len(f) {
			continue
		}
		if f[i+1] == "cgroup" && slices.Contains(strings.Split(f[i+3], ","), ctrl) && v1 == "" {
			v1 = f[4]
		}
		if f[i+1] == "cgroup2" && v2 == "" {
			v2 = f[4]
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		p := strings.SplitN(line, ":", 3)
		if len(p) != 3 {
			continue
		}
		if v1 != "" && slices.Contains(strings.Split(p[1], ","), ctrl) {
			return filepath.Join(v1, p[2], file)
		}
		if v1 == "" && p[1] == "" {
			return filepath.Join(v2, p[2], file)
		}
	}
	t.Fatalf("no %s cgroup for pid %d in %q", ctrl, pid, cg)
	return ""
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestConfined runs the probe in a jail with every layer and checks each
// from inside (its report) and from outside (/proc, the cgroup files).
func TestConfined(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	exe, _ := os.Executable()
	home, _ := os.UserHomeDir()
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.txt")
	if err := os.WriteFile(ro, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	rw := filepath.Join(dir, "rw")
	if err := os.Mkdir(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(rw, 0o777)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("secret"), 0o644)
	fdPath := filepath.Join(dir, "through-fd.txt")
	fd3, err := os.OpenFile(fdPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fd3.Close()
	fd4r, fd4w, _ := os.Pipe()
	defer fd4w.Close()
	outR, outW, _ := os.Pipe()
	defer outR.Close()

	name := testCgroupPrefix + strconv.Itoa(int(uid))
	spec := jail.Spec{
		Path: probePath,
		Args: []string{probePath, "probe", "/data/ro.txt", "/data/rw",
			home, dir, secret, fdPath, exe, "/proc", "/sys", "/old", "/root", "/home", "/var", "/etc/passwd", "/dev/kvm", "/dev/null", "/dev/zero", "/usr/bin/qemu-system-x86_64"},
		Env: []string{"FOO=bar"},
		UID: uid, GID: uid,
		Binds: []jail.Bind{
			{Host: exe, Inside: probePath},
			{Host: ro, Inside: "/data/ro.txt"},
			{Host: rw, Inside: "/data/rw", Writable: true},
		},
		Devices:    []string{"/dev/null", "/dev/kvm"},
		Cgroup:     &jail.CgroupSpec{Name: name, MemoryMaxBytes: 256 << 20, PidsMax: 64, CPUWeight: 50},
		ExtraFiles: []*os.File{fd3, fd4r},
		Stdout:     outW,
		Stderr:     os.Stderr,
	}
	c := startJailed(t, spec, fd4r, outW)
	defer c.Process().Kill()
	if err := c.Ready(); err != nil {
		t.Fatal(err)
	}
	layers := c.Layers()
	for _, l := range layers.All() {
		t.Logf("%-18s applied=%-5v %s", l.Name, l.Applied, l.Note)
	}
	checkAgainstProbe(t, layers)

	var r report
	line := readLine(t, outR, 20*time.Second)
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("probe report %q: %v", line, err)
	}
	t.Logf("report: %+v", r)
	pid := c.Process().Pid

	// Identity.
	if r.UID != int(uid) || r.EUID != int(uid) || r.GID != int(uid) || len(r.Groups) != 0 {
		t.Errorf("identity: uid %d euid %d gid %d groups %v, want %d and no groups", r.UID, r.EUID, r.GID, r.Groups, uid)
	}
	st := procStatus(t, pid)
	want := map[string]string{
		"Uid": strings.Repeat(strconv.Itoa(int(uid))+" ", 4), "Gid": strings.Repeat(strconv.Itoa(int(uid))+" ", 4),
		"Groups": "", "NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000",
		"CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
	}
	for k, v := range want {
		if got := st[k]; got != strings.TrimSpace(v) {
			t.Errorf("/proc/%d/status %s: %q, want %q", pid, k, got, strings.TrimSpace(v))
		}
	}
	if r.NoNewPrivs != 1 || r.Seccomp != 2 || r.CapEff != 0 || r.CapPrm != 0 {
		t.Errorf("inside: no_new_privs %d seccomp %d capabilities %#x/%#x, want 1, 2 and none", r.NoNewPrivs, r.Seccomp, r.CapEff, r.CapPrm)
	}
	if !slices.Equal(r.Env, []string{"FOO=bar"}) {
		t.Errorf("environment %q, want exactly FOO=bar", r.Env)
	}

	// Namespaces.
	for _, ns := range []string{"mnt", "net", "ipc", "pid"} {
		ours, _ := os.Readlink("/proc/self/ns/" + ns)
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil || ours == theirs {
			t.Errorf("%s namespace: ours %s, the program's %s (%v): want different", ns, ours, theirs, err)
		}
	}
	if !slices.Equal(r.Ifaces, []string{"lo"}) {
		t.Errorf("network interfaces %v, want only lo", r.Ifaces)
	}

	// File system.
	sort.Strings(r.Root)
	if wantRoot := []string{"bin", "data", "dev", "etc", "lib", "lib64", "probe", "sbin", "tmp", "usr"}; !slices.Equal(r.Root, wantRoot) {
		t.Errorf("/ holds %v, want %v", r.Root, wantRoot)
	}
	for _, p := range []string{home, dir, secret, fdPath, exe, "/proc", "/sys", "/old", "/root", "/home", "/var", "/etc/passwd", "/dev/zero"} {
		if r.Present[p] == "" {
			t.Errorf("%s is visible inside the jail", p)
		}
	}
	for _, p := range []string{"/dev/kvm", "/dev/null", "/usr/bin/qemu-system-x86_64"} {
		if r.Present[p] != "" {
			t.Errorf("%s is missing inside the jail: %s", p, r.Present[p])
		}
	}
	if !strings.Contains(r.ROWrite, "read-only file system") {
		t.Errorf("write into the read-only bind: %q, want EROFS", r.ROWrite)
	}
	if b, _ := os.ReadFile(ro); string(b) != "original" {
		t.Errorf("read-only bind changed: %q", b)
	}
	if r.RWWrite != "" {
		t.Errorf("write into the writable bind: %s", r.RWWrite)
	} else if b, _ := os.ReadFile(filepath.Join(rw, "written")); string(b) != "hello" {
		t.Errorf("writable bind: host sees %q", b)
	}
	if r.FDWrite != "" {
		t.Errorf("write to descriptor 3: %s", r.FDWrite)
	}
	if r.DevNull != "" || r.DevKVM != "" {
		t.Errorf("devices: /dev/null %q, /dev/kvm %q; want both usable", r.DevNull, r.DevKVM)
	}
	for what, e := range map[string]string{"mount": r.Mount, "unshare(CLONE_NEWUSER)": r.Unshare,
		"clone(CLONE_NEWUSER)": r.CloneNewUser, "ptrace": r.Ptrace} {
		if !strings.Contains(e, "operation not permitted") {
			t.Errorf("%s: %q, want EPERM", what, e)
		}
	}
	// Without the filter these give EFAULT, EFAULT and a pid (or ENOSYS
	// only for x32 on kernels without it).
	for what, e := range map[string]string{"clone3": r.Clone3, "io_uring_setup": r.IOURing, "x32 getpid": r.X32} {
		if !strings.Contains(e, "function not implemented") {
			t.Errorf("%s: %q, want ENOSYS", what, e)
		}
	}
	// Descriptors: 0-4 are ours; anything above must be the Go runtime's
	// own (an epoll, an eventfd), never a pipe or file of the parent.
	for _, fd := range r.FDs {
		n, _ := strconv.Atoi(fd)
		if n <= 4 {
			continue
		}
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, n))
		if !strings.HasPrefix(target, "anon_inode:") {
			t.Errorf("descriptor %d leaked into the program: %s", n, target)
		}
	}

	// Rlimits.
	if r.NOFILE != [2]uint64{4096, 4096} || r.CORE != [2]uint64{0, 0} {
		t.Errorf("rlimits: NOFILE %v CORE %v, want 4096/4096 and 0/0", r.NOFILE, r.CORE)
	}

	// Cgroups: the program is in the group and its limits are set.
	memFile := "memory.limit_in_bytes"
	if filepath.Base(filepath.Dir(filepath.Dir(cgroupFile(t, pid, "memory", "x")))) == "unified" || !fileExists(cgroupFile(t, pid, "memory", memFile)) {
		memFile = "memory.max"
	}
	for ctrl, f := range map[string][2]string{"memory": {memFile, strconv.Itoa(256 << 20)}, "pids": {"pids.max", "64"}} {
		p := cgroupFile(t, pid, ctrl, f[0])
		if filepath.Base(filepath.Dir(p)) != name {
			t.Errorf("%s: the program is in %s, not in %s", ctrl, filepath.Dir(p), name)
			continue
		}
		if got := readTrim(t, p); got != f[1] {
			t.Errorf("%s = %s, want %s", p, got, f[1])
		}
	}
	cgDirs := []string{filepath.Dir(cgroupFile(t, pid, "memory", "x")), filepath.Dir(cgroupFile(t, pid, "pids", "x"))}

	fd4w.Close() // the probe exits
	if err := waitTimeout(t, c, 20*time.Second); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if b, _ := os.ReadFile(fdPath); string(b) != "through the descriptor\n" {
		t.Errorf("file written through descriptor 3 holds %q", b)
	}
	for _, d := range cgDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there after Wait (%v)", d, err)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestShell runs /bin/sh confined: /bin resolves through the /usr
// symlinks, and the shell sees what the probe sees.
func TestShell(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	var out strings.Builder
	pr, pw, _ := os.Pipe()
	done := make(chan struct{})
	go func() { io.Copy(&out, pr); close(done) }()
	c := startJailed(t, jail.Spec{
		Path: "/bin/sh", Args: []string{"sh", "-c", `id -u; id -G; ls /; cat /proc/self/status 2>&1 | head -1; ls /tmp; echo x > /usr/x 2>&1 || echo ro; echo x > /tmp/x && echo tmp-ok`},
		UID: uid, GID: uid, Stdout: pw, Stderr: pw,
	}, pw)
	if err := waitTimeout(t, c, 20*time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	<-done
	got := out.String()
	t.Logf("%s", got)
	u := strconv.Itoa(int(uid))
	for _, w := range []string{u + "\n" + u + "\n", "bin\ndev\netc\nlib\nlib64\nsbin\ntmp\nusr\n", "No such file", "ro\n", "tmp-ok\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("shell output lacks %q", w)
		}
	}
}

// TestPdeathsig: the confined program dies when the process that started
// it is killed, although its uid change cleared the parent-death signal
// the helper was started with.
func TestPdeathsig(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	// Orphans are reparented to this process, so we can reap the program
	// and see what killed it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	mid := exec.Command(os.Args[0], "middle", strconv.Itoa(int(uid)))
	mid.Stderr = os.Stderr
	out, _ := mid.StdoutPipe()
	if err := mid.Start(); err != nil {
		t.Fatal(err)
	}
	defer mid.Process.Kill()
	line := readLine(t, out, 30*time.Second)
	var pid int
	if _, err := fmt.Sscanf(line, "PID %d", &pid); err != nil {
		t.Fatalf("middle process: %q", line)
	}
	if got := procStatus(t, pid)["Uid"]; !strings.HasPrefix(got, strconv.Itoa(int(uid))+" ") {
		t.Fatalf("confined program %d runs as %q, want uid %d", pid, got, uid)
	}
	mid.Process.Kill()
	mid.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err == nil && wpid == pid {
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("confined program ended with %v, want SIGKILL", ws)
			}
			return
		}
		if time.Now().After(deadline) {
			if pfd, err := unix.PidfdOpen(pid, 0); err == nil {
				unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
				unix.Close(pfd)
			}
			t.Fatalf("confined program %d outlived the process that started it by 10 s (wait4: %v)", pid, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStageErrors: failures inside the helper come back typed, naming the
// step.
func TestStageErrors(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	exe, _ := os.Executable()
	cases := []struct {
		name string
		spec jail.Spec
		step string
		kind error
	}{
		{"missing Path", jail.Spec{Path: "/usr/bin/no-such-program"}, "execve /usr/bin/no-such-program", errdefs.ErrNotFound},
		{"Path not inside the jail", jail.Spec{Path: exe}, "execve " + exe, errdefs.ErrNotFound},
		{"missing Bind", jail.Spec{Path: "/bin/true", Binds: []jail.Bind{{Host: "/no/such/dir", Inside: "/data"}}}, "bind /no/such/dir", errdefs.ErrNotFound},
		{"device that is not one", jail.Spec{Path: "/bin/true", Devices: []string{"/dev/shm"}}, "device /dev/shm", errdefs.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.Args, s.UID, s.GID = []string{"x"}, uid, uid
			c, err := jail.Command("", s)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			err = c.Ready()
			var se *jail.StageError
			if !errors.As(err, &se) || se.Step != tc.step || !errors.Is(err, tc.kind) {
				t.Fatalf("Ready: %v (%#v), want a StageError at step %q wrapping %v", err, err, tc.step, tc.kind)
			}
			t.Logf("%v", err)
			if werr := waitTimeout(t, c, 10*time.Second); werr != err {
				t.Errorf("Wait: %v, want Ready's error", werr)
			}
		})
	}

	for _, s := range []jail.Spec{
		{Path: "bin/true", Args: []string{"x"}, UID: uid, GID: uid},
		{Path: "/bin/true", Args: []string{"x"}},
		{Path: "/bin/true", UID: uid, GID: uid},
		{Path: "/bin/true", Args: []string{"x"}, UID: uid, GID: uid, Binds: []jail.Bind{{Host: "/etc", Inside: "/usr/etc"}}},
		{Path: "/bin/true", Args: []string{"x"}, UID: uid, GID: uid, Binds: []jail.Bind{{Host: "/etc/", Inside: "/x"}}},
		{Path: "/bin/true", Args: []string{"x"}, UID: uid, GID: uid, Devices: []string{"/tmp/x"}},
		{Path: "/bin/true", Args: []string{"x"}, UID: uid, GID: uid, Cgroup: &jail.CgroupSpec{Name: "../x"}},
		{Path: "/bin/true", Args: []string{"x"}, UID: uid, GID: uid, ExtraFiles: []*os.File{nil}},
	} {
		if _, err := jail.Command("", s); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Command(%+v): %v, want ErrInvalidArgument", s, err)
		}
	}

	// A cgroup name already in use by a running program is refused.
	name := testCgroupPrefix + "busy-" + strconv.Itoa(int(uid))
	spec := jail.Spec{Path: probePath, Args: []string{probePath, "sleep"}, UID: uid, GID: uid,
		Binds: []jail.Bind{{Host: exe, Inside: probePath}}, Cgroup: &jail.CgroupSpec{Name: name, PidsMax: 32}}
	first, _ := jail.Command("", spec)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	if err := first.Ready(); err != nil {
		t.Fatal(err)
	}
	second, _ := jail.Command("", spec)
	if err := second.Start(); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second Start with cgroup %s: %v, want ErrAlreadyExists", name, err)
		if err == nil {
			second.Process().Kill()
			second.Wait()
		}
	}
	first.Process().Kill()
	waitTimeout(t, first, 10*time.Second)
}

// runCaller copies the test binary where anyone can run it and runs its
// "caller" mode through argv (the binary's path is appended to argv[:n]),
// returning what the caller printed: Probe's layers, the program's layers,
// the probe's report.
func runCaller(t *testing.T, cred *syscall.Credential, prefix []string, args ...string) (probe, got jail.Layers, r report) {
	t.Helper()
	dir, err := os.MkdirTemp("", "jailtest-caller-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the caller must reach the copied binary
	exe, _ := os.Executable()
	bin := filepath.Join(dir, "jail.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string(nil), prefix...), bin, "caller"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	out, err := cmd.Output()
	timer.Stop()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("caller: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 {
		t.Fatalf("caller printed %d lines, want 4", len(lines))
	}
	for i, v := range []any{&probe, &got, &r} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	probeAll := probe.All()
	for i, l := range got.All() {
		t.Logf("%-18s applied=%-5v %s", l.Name, l.Applied, l.Note)
		if probeAll[i].Applied && !l.Applied {
			t.Errorf("layer %s: Probe says the host has it (%s), not applied: %s", l.Name, probeAll[i].Note, l.Note)
		}
	}
	if strings.TrimSpace(lines[3]) != "WAIT" {
		t.Errorf("caller: %s", lines[3])
	}
	if r.NoNewPrivs != 1 || r.Seccomp != 2 || r.CapEff != 0 || r.CapPrm != 0 {
		t.Errorf("inside: no_new_privs %d seccomp %d capabilities %#x/%#x, want 1, 2 and none", r.NoNewPrivs, r.Seccomp, r.CapEff, r.CapPrm)
	}
	for what, e := range map[string]string{"mount": r.Mount, "unshare(CLONE_NEWUSER)": r.Unshare, "ptrace": r.Ptrace} {
		if !strings.Contains(e, "operation not permitted") {
			t.Errorf("%s: %q, want EPERM", what, e)
		}
	}
	return probe, got, r
}

// TestNonRootCaller runs a caller as nobody: no uid drop, but a user
// namespace gives the mount, network and IPC layers.
func TestNonRootCaller(t *testing.T) {
	requireRoot(t) // to become nobody
	probe, got, r := runCaller(t, &syscall.Credential{Uid: 65534, Gid: 65534}, nil)
	if probe.UID.Applied || got.UID.Applied {
		t.Errorf("a non-root caller cannot drop to another uid: %+v", got.UID)
	}
	if r.UID != 65534 {
		t.Errorf("inside: uid %d, want the caller's 65534", r.UID)
	}
	if got.PivotRoot.Applied {
		if r.Present["/proc"] == "" {
			t.Errorf("/proc visible in the jail")
		}
		sort.Strings(r.Root)
		if !slices.Equal(r.Root, []string{"bin", "dev", "etc", "lib", "lib64", "sbin", "tmp", "usr"}) {
			t.Errorf("/ holds %v", r.Root)
		}
	}
}

// TestRootWithoutSysAdmin runs a root caller whose bounding set lacks
// CAP_SYS_ADMIN, like root in a default Docker container: no namespaces,
// reported, but the uid drop, cgroups and the rest still apply.
func TestRootWithoutSysAdmin(t *testing.T) {
	requireRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	uid := testUID(t)
	probe, got, r := runCaller(t, nil, []string{setpriv, "--bounding-set", "-sys_admin", "--"}, strconv.Itoa(int(uid)))
	if probe.MountNS.Applied || got.MountNS.Applied || got.PivotRoot.Applied || got.NetNS.Applied {
		t.Errorf("namespaces without CAP_SYS_ADMIN: probe %+v, got %+v", probe.MountNS, got.MountNS)
	}
	if !got.UID.Applied || r.UID != int(uid) || r.GID != int(uid) {
		t.Errorf("uid drop: %+v, inside uid %d gid %d, want %d", got.UID, r.UID, r.GID, uid)
	}
	if !got.Memory.Applied || !got.Pids.Applied {
		t.Errorf("cgroups: %+v %+v", got.Memory, got.Pids)
	}
	if r.Present["/proc"] != "" {
		t.Errorf("without a mount namespace the host's /proc should be visible (the layer is reported missing): %q", r.Present["/proc"])
	}
}

// TestKeepRoot: a root caller's program that must act as root on host files
// (virtiofsd) keeps uid 0 but every other layer, and is reported without
// the uid layer.
func TestKeepRoot(t *testing.T) {
	requireRoot(t)
	var out strings.Builder
	pr, pw, _ := os.Pipe()
	done := make(chan struct{})
	go func() { io.Copy(&out, pr); close(done) }()
	c := startJailed(t, jail.Spec{
		Path: "/bin/sh", Args: []string{"sh", "-c", `id -u; ls /; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status 2>&1 | head -1`},
		KeepRoot: true, Stdout: pw, Stderr: pw,
	}, pw)
	if err := waitTimeout(t, c, 20*time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	<-done
	got := out.String()
	for _, w := range []string{"0\n", "bin\ndev\netc\nlib\nlib64\nsbin\ntmp\nusr\n", "No such file"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	l := c.Layers()
	if l.UID.Applied || !strings.Contains(l.UID.Note, "KeepRoot") || !l.NoNewPrivs.Applied || !l.Seccomp.Applied {
		t.Errorf("layers: %+v", l)
	}
}
