package jail_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/jail"
)

// The test binary is its own helper (jail.Main) and, bound into the jail
// at probePath, its own confined program: "probe", "sleep" and "forkbomb"
// run inside a jail; "middle" and "caller" run outside and start one.
const probePath = "/probe"

func TestMain(m *testing.M) {
	jail.Main()
	if len(os.Args) > 1 {
		if f, ok := modes[os.Args[1]]; ok {
			f(os.Args[2:])
			os.Exit(0)
		}
	}
	code := m.Run()
	if uidState.dir != "" {
		os.RemoveAll(uidState.dir)
	}
	if left := leftoverCgroups(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: cgroups left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// leftoverCgroups lists the test's cgroups still under /sys/fs/cgroup.
func leftoverCgroups() []string {
	var left []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), testCgroupPrefix) {
			left = append(left, p)
		}
		if strings.Count(p, "/") > 6 {
			return filepath.SkipDir
		}
		return nil
	})
	return left
}

var modes = map[string]func(args []string){
	"probe":    probeMode,
	"sleep":    func([]string) { select {} },
	"forkbomb": forkbombMode,
	"middle":   middleMode,
	"caller":   callerMode,
}

// report is what the probe sees from inside the jail.
type report struct {
	UID, EUID, GID int
	Groups         []int
	NoNewPrivs     int
	Seccomp        int // PR_GET_SECCOMP: 2 is filter mode
	CapEff, CapPrm uint64
	Root           []string
	Present        map[string]string // path: "" if it exists, else the stat error
	ROWrite        string            // error writing into the read-only bind
	RWWrite        string            // error writing into the writable bind
	FDWrite        string            // error writing to descriptor 3
	Mount          string            // error of mount(2)
	Unshare        string            // error of unshare(CLONE_NEWUSER)
	CloneNewUser   string            // error of clone(CLONE_NEWUSER)
	Ptrace         string            // error of ptrace(PTRACE_TRACEME)
	Clone3         string            // error of clone3(NULL, 0)
	IOURing        string            // error of io_uring_setup(1, NULL)
	X32            string            // error of getpid through the x32 ABI
	DevNull        string            // error writing /dev/null
	DevKVM         string            // error opening /dev/kvm read-write
	NOFILE, CORE   [2]uint64
	Ifaces         []string
	FDs            []string // open descriptors, from fstat on 0..63
	Env            []string
	Pid            int    // getpid(): 1 in a PID namespace of its own
	KillPeer       string // error of kill($BOXLITE_TEST_PEER, 0), when set
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// probeMode: probe RO-FILE RW-DIR PATH...; writes a report on stdout, then
// waits for EOF on descriptor 4.
func probeMode(args []string) {
	r := report{UID: os.Getuid(), EUID: os.Geteuid(), GID: os.Getgid(), Present: map[string]string{}, Env: os.Environ(), Pid: os.Getpid()}
	if peer := os.Getenv("BOXLITE_TEST_PEER"); peer != "" {
		r.KillPeer = errString(unix.Kill(mustAtoi(peer), 0))
	}
	r.Groups, _ = os.Getgroups()
	r.NoNewPrivs, _ = unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	r.Seccomp, _ = unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if unix.Capget(&hdr, &caps[0]) == nil {
		r.CapEff = uint64(caps[0].Effective) | uint64(caps[1].Effective)<<32
		r.CapPrm = uint64(caps[0].Permitted) | uint64(caps[1].Permitted)<<32
	}
	ents, _ := os.ReadDir("/")
	for _, e := range ents {
		r.Root = append(r.Root, e.Name())
	}
	for _, p := range args[2:] {
		_, err := os.Lstat(p)
		r.Present[p] = errString(err)
	}
	r.ROWrite = errString(os.WriteFile(args[0], []byte("overwritten"), 0o644))
	r.RWWrite = errString(os.WriteFile(args[1]+"/written", []byte("hello"), 0o644))
	_, err := os.NewFile(3, "fd3").WriteString("through the descriptor\n")
	r.FDWrite = errString(err)
	r.Mount = errString(unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	r.Unshare = errString(unix.Unshare(unix.CLONE_NEWUSER))
	runtime.LockOSThread()
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 { // the child, should the filter have let it through
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if e == 0 {
		var ws unix.WaitStatus
		unix.Wait4(int(pid), &ws, 0, nil)
	}
	r.CloneNewUser = errString(errnoErr(e))
	_, _, e = unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	r.Ptrace = errString(errnoErr(e))
	_, _, e = unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	r.Clone3 = errString(errnoErr(e))
	_, _, e = unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
	r.IOURing = errString(errnoErr(e))
	_, _, e = unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
	r.X32 = errString(errnoErr(e))
	if f, err := os.OpenFile("/dev/null", os.O_WRONLY, 0); err != nil {
		r.DevNull = err.Error()
	} else {
		_, err = f.WriteString("x")
		r.DevNull = errString(err)
		f.Close()
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		r.DevKVM = err.Error()
	} else {
		f.Close()
	}
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	r.NOFILE = [2]uint64{rl.Cur, rl.Max}
	unix.Getrlimit(unix.RLIMIT_CORE, &rl)
	r.CORE = [2]uint64{rl.Cur, rl.Max}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		r.Ifaces = append(r.Ifaces, i.Name)
	}
	for fd := 0; fd < 64; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			r.FDs = append(r.FDs, strconv.Itoa(fd))
		}
	}
	json.NewEncoder(os.Stdout).Encode(r)
	buf := make([]byte, 1)
	os.NewFile(4, "fd4").Read(buf)
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// forkbombMode starts "sleep" children until the kernel refuses, then
// prints how many it started and why it stopped.
func forkbombMode([]string) {
	n := 0
	var err error
	for n < 10000 {
		cmd := exec.Command(probePath, "sleep")
		if err = cmd.Start(); err != nil {
			break
		}
		n++
	}
	fmt.Printf("started %d: %v\n", n, err)
}

// middleMode runs outside any jail: it starts a confined "sleep" from a
// locked thread, prints its pid and waits to be killed.
func middleMode(args []string) {
	runtime.LockOSThread()
	exe, _ := os.Executable()
	c, err := jail.Command("", jail.Spec{
		Path: probePath, Args: []string{probePath, "sleep"},
		UID: uint32(mustAtoi(args[0])), GID: uint32(mustAtoi(args[0])),
		Binds: []jail.Bind{{Host: exe, Inside: probePath}},
	})
	if err == nil {
		err = c.Start()
	}
	if err == nil {
		err = c.Ready()
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("PID", c.Process().Pid)
	c.Wait()
	os.Exit(1)
}

// callerMode [UID] runs outside any jail as a non-root user (or as a root
// caller short of capabilities, dropping to UID): it prints Probe's report,
// then runs a probe confined and passes its report on. The probe is bound
// at its host path, so it runs with or without a mount namespace.
func callerMode(args []string) {
	out := json.NewEncoder(os.Stdout)
	out.Encode(jail.Probe())
	exe, _ := os.Executable()
	fd3r, fd3w, _ := os.Pipe()
	fd4r, fd4w, _ := os.Pipe()
	stdoutR, stdoutW, _ := os.Pipe()
	spec := jail.Spec{
		Path: exe, Args: []string{exe, "probe", exe, "/tmp", "/etc", "/proc"},
		Binds:      []jail.Bind{{Host: exe}},
		Cgroup:     &jail.CgroupSpec{Name: "boxlite-jailtest-caller", MemoryMaxBytes: 256 << 20, PidsMax: 64, CPUWeight: 100},
		ExtraFiles: []*os.File{fd3w, fd4r},
		Stdout:     stdoutW, Stderr: os.Stderr,
	}
	if len(args) > 0 {
		spec.UID = uint32(mustAtoi(args[0]))
		spec.GID = spec.UID
	}
	c, err := jail.Command("", spec)
	if err == nil {
		err = c.Start()
	}
	fd3w.Close()
	fd4r.Close()
	stdoutW.Close()
	if err == nil {
		err = c.Ready()
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	out.Encode(c.Layers())
	line, _ := bufio.NewReader(stdoutR).ReadString('\n')
	fmt.Print(line)
	fd4w.Close()
	fmt.Println("WAIT", errString(c.Wait()))
	fd3r.Close()
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// uidStateDir is shared by the tests of this process so their uids
// differ; made on first use (the helper and probe processes of this binary
// never need it) and removed by TestMain.
var uidState struct {
	once sync.Once
	dir  string
}

func uidStateDir(tb testing.TB) string {
	uidState.once.Do(func() {
		d, err := os.MkdirTemp("", "jailtest-uids-")
		if err != nil {
			tb.Fatal(err)
		}
		uidState.dir = d
	})
	return uidState.dir
}

func testUID(t *testing.T) uint32 {
	t.Helper()
	uid, release, err := jail.AllocUID(uidStateDir(t), jail.UIDRangeLo, jail.UIDRangeHi)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return uid
}

// requireRoot fails (never skips) a test that needs a root caller.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs a root caller (the uid drop and cgroup layers); run the suite as root")
	}
}

// checkAgainstProbe fails for every layer Probe says this host gives but
// the program did not get.
func checkAgainstProbe(t *testing.T, got jail.Layers) {
	t.Helper()
	probe := jail.Probe().All()
	for i, l := range got.All() {
		if probe[i].Applied && !l.Applied {
			t.Errorf("layer %s: the host has it (%s) but it was not applied: %s", l.Name, probe[i].Note, l.Note)
		}
	}
}

func waitTimeout(t *testing.T, c *jail.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		c.Process().Kill()
		t.Fatalf("confined program did not exit within %v", d)
		return nil
	}
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// startJailed starts spec's command, then closes the test's copies of what
// it handed the child (pipe ends), failing the test on any error.
func startJailed(t *testing.T, spec jail.Spec, handed ...io.Closer) *jail.Cmd {
	t.Helper()
	c, err := jail.Command("", spec)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start()
	for _, h := range handed {
		h.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}
