package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// archiveEntry is one entry of a box archive.
type archiveEntry struct {
	name string
	data []byte
}

func readBoxArchive(t *testing.T, path string) []archiveEntry {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	zr, err := zstd.NewReader(f)
	must(t, err)
	defer zr.Close()
	tr := tar.NewReader(zr)
	var out []archiveEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		data, err := io.ReadAll(tr)
		must(t, err)
		out = append(out, archiveEntry{h.Name, data})
	}
}

func writeBoxArchive(t *testing.T, path string, ents []archiveEntry) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	zw, _ := zstd.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		must(t, tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(e.data))}))
		tw.Write(e.data)
	}
	must(t, tw.Close())
	must(t, zw.Close())
	must(t, f.Close())
}

// hostileArchive rewrites the config in a real export's manifest as an
// attacker would: ports published on 0.0.0.0, an open network, kernel
// arguments that hang the boot, a 28-year boot timeout, a 1 TiB disk,
// 64 CPUs, detach and auto-remove, and the image name given.
func hostileArchive(t *testing.T, real, path, imageName string) {
	t.Helper()
	ents := readBoxArchive(t, real)
	var m map[string]any
	must(t, json.Unmarshal(ents[0].data, &m))
	c := m["config"].(map[string]any)
	c["image"] = imageName
	c["ports"] = []map[string]any{{"host_ip": "0.0.0.0", "host_port": 47022, "guest_port": 22}}
	c["network"] = map[string]any{"mode": "enabled", "allow_net": []string{"0.0.0.0/0"}}
	c["kernel_args"] = []string{"rdinit=/nonexistent", "panic=0"}
	c["boot_timeout"] = int64(28 * 365 * 24 * time.Hour)
	c["disk_size_gb"], c["cpus"] = 1024, 64
	c["detach"], c["auto_remove"] = false, true
	c["env"] = map[string]string{"FROM_ARCHIVE": "kept"}
	var err error
	ents[0].data, err = json.Marshal(m)
	must(t, err)
	writeBoxArchive(t, path, ents)
}

// noEscapes fails if out holds a raw control character (but newline and tab).
func noEscapes(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 }); i >= 0 {
		t.Fatalf("%s has a raw control character at %d: %q", what, i, out)
	}
}

// A hostile archive imports as a new box: without its published ports,
// network policy, kernel arguments, boot timeout, CPUs, 1 TiB disk or
// auto-remove (the importer's options or the defaults instead); one whose
// image name carries escape sequences is refused with a typed error that
// quotes it escaped; `boxlite ls` shows no raw escape sequence, even for a
// record written before image names were checked; and the imported box
// starts (the archive's kernel arguments would have hung its boot for 28
// years) and is removed. One boot.
func TestHostileArchiveImportsAsANewBox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := rt.Create(ctx, "alpine:latest", boxlite.WithName("archive-src"))
	must(t, err)
	defer src.Remove(context.Background(), true)
	dir := t.TempDir()
	real, err := src.Export(ctx, filepath.Join(dir, "real.boxlite"))
	must(t, err)

	// An image name with escape sequences: refused, typed, quoted.
	escName := filepath.Join(dir, "esc.boxlite")
	hostileArchive(t, real, escName, "\x1b]0;pwned\x07\x1b[2Jalpine:latest")
	if _, err := rt.ImportBox(ctx, escName, ""); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "image reference") {
		t.Fatalf("import of an image name with escapes: %v", err)
	}
	_, errOut, code := cli(t, "import", escName)
	if code != 125 || !strings.Contains(errOut, `\x1b]0;pwned`) {
		t.Fatalf("CLI import of an image name with escapes: exit %d, %q", code, errOut)
	}
	noEscapes(t, "import's error", errOut)

	// Everything else hostile: imported without it.
	path := filepath.Join(dir, "hostile.boxlite")
	hostileArchive(t, real, path, "alpine:latest")
	out := mustCLI(t, "import", "--name", "imported-hostile", path)
	t.Cleanup(func() { cli(t, "rm", "-f", "imported-hostile") })
	var info abi.BoxInfo // the CLI prints the wire's
	must(t, json.Unmarshal([]byte(out), &info))
	c := info.Config
	def := abi.BoxConfig{MemoryMiB: abi.DefaultMemoryMiB, CPUs: abi.DefaultCPUs, DiskSizeGB: abi.DefaultDiskSizeGB,
		BootTimeoutSecs: abi.SecondsOf(abi.DefaultBootTimeout)}
	switch {
	case len(c.Ports) != 0:
		t.Errorf("published ports kept: %+v", c.Ports)
	case len(c.Network.AllowNet) != 0 || c.Network.Mode != boxlite.NetworkEnabled:
		t.Errorf("network policy kept: %+v", c.Network)
	case len(c.KernelArgs) != 0:
		t.Errorf("kernel arguments kept: %q", c.KernelArgs)
	case c.BootTimeoutSecs != def.BootTimeoutSecs || c.CPUs != def.CPUs || c.MemoryMiB != def.MemoryMiB || c.DiskSizeGB != def.DiskSizeGB:
		t.Errorf("runtime config kept: boot timeout %s, %d cpus, %d MiB, %d GB", c.BootTimeoutSecs, c.CPUs, c.MemoryMiB, c.DiskSizeGB)
	case c.AutoRemove || !c.Detach:
		t.Errorf("auto-remove %v / detach %v: want the importer's (a CLI box is detached)", c.AutoRemove, c.Detach)
	case c.Env["FROM_ARCHIVE"] != "kept" || c.Image != "alpine:latest":
		t.Errorf("content lost: env %v image %q", c.Env, c.Image)
	}
	// The importer's options apply: a published port of its choosing.
	out = mustCLI(t, "import", "--name", "imported-chosen", "--memory", "256", "-p", "0:80", path)
	t.Cleanup(func() { cli(t, "rm", "-f", "imported-chosen") })
	must(t, json.Unmarshal([]byte(out), &info))
	if c := info.Config; c.MemoryMiB != 256 || len(c.Ports) != 1 || c.Ports[0].HostIP != "127.0.0.1" || c.Ports[0].HostPort != 0 {
		t.Errorf("import with options: %+v", c)
	}

	// A record from before image names were checked: ls and info escape it.
	old, err := rt.Create(ctx, "alpine:latest", boxlite.WithName("old-record"))
	must(t, err)
	defer old.Remove(context.Background(), true)
	recPath := filepath.Join(old.Info().Dir, "box.json")
	rec, err := os.ReadFile(recPath)
	must(t, err)
	rec = bytes.Replace(rec, []byte(`"image": "alpine:latest"`), []byte(`"image": "\u001b]0;pwned\u0007\u001b[2J\u009b31malpine"`), 1)
	must(t, os.WriteFile(recPath, rec, 0o600))
	ls := mustCLI(t, "ls", "-a")
	noEscapes(t, "ls", ls)
	if !strings.Contains(ls, "imported-hostile") || !strings.Contains(ls, "?]0;pwned??[2J?31malpine") {
		t.Fatalf("ls:\n%s", ls)
	}
	noEscapes(t, "info", mustCLI(t, "info", "old-record"))

	// The imported box starts: its boot is bounded by the defaults, not the archive's.
	if _, errOut, code := cli(t, "start", "imported-hostile"); code != 0 {
		t.Fatalf("start of the imported box: exit %d: %s", code, errOut)
	}
	if out := mustCLI(t, "exec", "imported-hostile", "--", "sh", "-c", "echo $FROM_ARCHIVE; cat /proc/cmdline"); !strings.HasPrefix(out, "kept\n") || strings.Contains(out, "rdinit") {
		t.Fatalf("imported box: %q", out)
	}
	mustCLI(t, "rm", "-f", "imported-hostile")
}

// boxDir is the directory of the box named name in the CLI's home.
func boxDir(t *testing.T, name string) string {
	t.Helper()
	b, err := rt.Get(context.Background(), name)
	must(t, err)
	return b.Info().Dir
}

// bootingShim waits for the shim that boots the box in dir to have
// written its pid under the box's lock and started its VMM, freezes that
// VMM (SIGSTOP: the boot cannot finish, however fast the host), and
// returns both pids.
func bootingShim(t *testing.T, dir string) (shim, vmm int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shim with a VMM for %s", dir)
		}
		b, err := os.ReadFile(filepath.Join(dir, shimapi.LockFile))
		if err != nil {
			continue
		}
		if shim, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || !running(shim) {
			continue
		}
		if vmm = descendantNamed(shim, "qemu-system"); vmm != 0 {
			must(t, syscall.Kill(vmm, syscall.SIGSTOP))
			if _, err := os.Stat(filepath.Join(dir, shimapi.SocketFile)); err == nil {
				t.Fatal("the box has its socket already: not a booting shim")
			}
			return shim, vmm
		}
	}
}

// descendantNamed is a live descendant of pid whose command name starts with prefix, 0 if none.
func descendantNamed(pid int, prefix string) int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(statFieldOr(n, 1)); err == nil {
			parent[n] = pp
		}
	}
	for n := range parent {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(n) + "/comm")
		if !strings.HasPrefix(string(comm), prefix) || !running(n) {
			continue
		}
		for p := parent[n]; p > 1; p = parent[p] {
			if p == pid {
				return n
			}
		}
	}
	return 0
}

func statFieldOr(pid, i int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if i >= len(f) {
		return ""
	}
	return f[i]
}

func startCLI(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), args...)
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// A start that is interrupted leaves nothing. A CLI `start` killed
// (SIGKILL) while its box boots leaves the booting shim, which holds the
// box's lock but has no socket yet: `info` says starting, and `rm -f` ends
// the shim and its VMM: both pids are gone when it returns. A CLI `start`
// interrupted with SIGINT ends its shim and VMM itself before it exits,
// and the box is stopped. No boot finishes (each VMM is frozen).
func TestInterruptedStartLeavesNothing(t *testing.T) {
	// A memory size of their own: a template of their shape is nobody else's.
	mustCLI(t, "create", "--name", "interrupted-1", "--memory", "208", "alpine:latest")
	t.Cleanup(func() { cli(t, "rm", "-f", "interrupted-1") })
	dir := boxDir(t, "interrupted-1")
	start := startCLI(t, "start", "interrupted-1")
	shim, vmm := bootingShim(t, dir)
	start.Process.Kill()
	start.Wait()
	if !running(shim) || !running(vmm) {
		t.Fatal("the shim or VMM ended with the CLI: this test needs a booting shim left behind")
	}
	var info abi.BoxInfo // the CLI prints the wire's
	must(t, json.Unmarshal([]byte(mustCLI(t, "info", "interrupted-1")), &info))
	if info.State != string(boxlite.StateStarting) {
		t.Errorf("info of a box whose shim is booting: %s, want starting", info.State)
	}
	if _, errOut, code := cli(t, "rm", "interrupted-1"); code == 0 || !strings.Contains(errOut, "starting") {
		t.Errorf("rm without -f of a starting box: exit %d: %s", code, errOut)
	}
	mustCLI(t, "rm", "-f", "interrupted-1")
	if running(shim) || running(vmm) {
		t.Fatalf("after rm -f: shim %d running %v, VMM %d running %v", shim, running(shim), vmm, running(vmm))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("box directory after rm -f: %v", err)
	}

	mustCLI(t, "create", "--name", "interrupted-2", "--memory", "208", "alpine:latest")
	t.Cleanup(func() { cli(t, "rm", "-f", "interrupted-2") })
	start = startCLI(t, "start", "interrupted-2")
	shim, vmm = bootingShim(t, boxDir(t, "interrupted-2"))
	must(t, start.Process.Signal(syscall.SIGINT))
	err := start.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("start interrupted by SIGINT: %v, want exit 130", err)
	}
	if running(shim) || running(vmm) {
		t.Fatalf("after an interrupted start: shim %d running %v, VMM %d running %v", shim, running(shim), vmm, running(vmm))
	}
	must(t, json.Unmarshal([]byte(mustCLI(t, "info", "interrupted-2")), &info))
	if info.State != string(boxlite.StateStopped) || !strings.Contains(info.LastExit, "start cancelled") {
		t.Errorf("box after an interrupted start: %s, last exit %q", info.State, info.LastExit)
	}
	mustCLI(t, "rm", "interrupted-2")
}

// `run --rm` of a command whose background child holds its output ends
// on SIGTERM (the command passed the signal, then abandoned) and removes
// its box: its shim is gone and `ls` no longer lists it. One boot.
func TestRunRmEndsOnSIGTERM(t *testing.T) {
	const name = "run-rm-sigterm"
	cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), "run", "--rm", "--name", name, "alpine:latest", "--",
		"sh", "-c", "echo started; exec sleep 600") // once it says so, the exec's own process runs on (a background child no longer holds an exec: issue 26)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cli(t, "rm", "-f", name) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("run: %q %v: %s", line, err, errOut.String())
	}
	lock, err := os.ReadFile(filepath.Join(boxDir(t, name), shimapi.LockFile))
	must(t, err)
	shim, err := strconv.Atoi(strings.TrimSpace(string(lock)))
	must(t, err)
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // a failure detector, not a speed test: it waited for the command
		t.Fatal("run ignored SIGTERM")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Errorf("run after SIGTERM: %v, want exit 143; stderr %s", err, errOut.String())
	}
	if running(shim) {
		t.Errorf("the box's shim (pid %d) outlived run --rm", shim)
	}
	if ls := mustCLI(t, "ls", "-a"); strings.Contains(ls, name) {
		t.Fatalf("run --rm left its box:\n%s", ls)
	}
}
