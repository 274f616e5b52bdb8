package jail_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/jail"
)

const (
	qemuBin      = "/usr/bin/qemu-system-x86_64"
	kernelInside = "/boot/vmlinuz"
	bannerWait   = 60 * time.Second
)

// guestKernel is the kernel the build puts in build/guest.
func guestKernel(tb testing.TB) string {
	tb.Helper()
	k, err := filepath.Abs("../../build/guest/vmlinuz")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(k); err != nil {
		tb.Fatalf("guest kernel missing (run make first): %v", err)
	}
	if _, err := os.Stat(qemuBin); err != nil {
		tb.Fatalf("QEMU missing (make setup installs it): %v", err)
	}
	return k
}

// qemuArgs is a TCG microvm that prints the kernel's console on stdout and
// answers QMP on descriptor 3, like hv starts it.
func qemuArgs(tb testing.TB, kernel string) []string {
	tb.Helper()
	khz, err := hv.HostTSCkHz()
	if err != nil {
		tb.Fatal(err)
	}
	return []string{qemuBin,
		"-M", "microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=on",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-accel", "tcg,tb-size=256", "-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16",
		"-m", "128", "-smp", "1",
		"-kernel", kernel,
		"-append", "console=ttyS0 panic=-1 tsc_early_khz=" + strconv.Itoa(khz),
		"-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
		"-chardev", "socket,id=qmp,fd=3", "-mon", "chardev=qmp,mode=control",
	}
}

// vmm is one QEMU being started, jailed or not.
type vmm struct {
	pid     int
	qmp     net.Conn
	dec     *json.Decoder
	console *bufio.Reader
	stop    func() error // kill and reap
	wait    func() error // reap
}

// startQEMU starts QEMU; a disk, when given, is attached through an fd set
// (descriptors 4 and 5), so QEMU never opens its path.
func startQEMU(tb testing.TB, jailed bool, uid uint32, disk *os.File) *vmm {
	tb.Helper()
	kernel := guestKernel(tb)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	child := os.NewFile(uintptr(fds[1]), "qmp")
	parent := os.NewFile(uintptr(fds[0]), "qmp")
	qmp, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	v := &vmm{qmp: qmp, dec: json.NewDecoder(qmp), console: bufio.NewReader(outR)}
	files := []*os.File{child}
	var diskArgs []string
	if disk != nil {
		// An fd set only dups a descriptor whose access mode matches, and
		// QEMU opens the disk read-only as well as read-write.
		ro, err := os.Open(disk.Name())
		if err != nil {
			tb.Fatal(err)
		}
		defer ro.Close()
		files = append(files, disk, ro)
		diskArgs = []string{"-add-fd", "fd=4,set=1", "-add-fd", "fd=5,set=1",
			"-drive", "id=d0,file=/dev/fdset/1,format=raw,if=none,cache=writeback,readonly=off",
			"-device", "virtio-blk-device,drive=d0"}
	}
	if jailed {
		args := append(qemuArgs(tb, kernelInside), diskArgs...)
		c, err := jail.Command("", jail.Spec{
			Path: qemuBin, Args: args, UID: uid, GID: uid,
			Binds:      []jail.Bind{{Host: kernel, Inside: kernelInside}},
			Devices:    []string{"/dev/null", "/dev/urandom"},
			Cgroup:     &jail.CgroupSpec{Name: testCgroupPrefix + "qemu-" + strconv.Itoa(int(uid)), MemoryMaxBytes: 1 << 30, PidsMax: 128, CPUWeight: 100},
			ExtraFiles: files,
			Stdout:     outW, Stderr: os.Stderr,
		})
		if err == nil {
			err = c.Start()
		}
		if err == nil {
			err = c.Ready()
		}
		if err != nil {
			tb.Fatal(err)
		}
		v.pid = c.Process().Pid
		v.stop = func() error { c.Process().Kill(); return c.Wait() }
		v.wait = c.Wait
	} else {
		args := append(qemuArgs(tb, kernel), diskArgs...)
		cmd := &exec.Cmd{Path: qemuBin, Args: args, ExtraFiles: files, Stdout: outW, Stderr: os.Stderr,
			SysProcAttr: &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL}}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		v.pid = cmd.Process.Pid
		v.stop = func() error { cmd.Process.Kill(); return cmd.Wait() }
		v.wait = cmd.Wait
	}
	child.Close()
	outW.Close()
	stop := v.stop
	v.stop = func() error { err := stop(); qmp.Close(); outR.Close(); return err }
	return v
}

// qmpReady reads the greeting and the answer to qmp_capabilities.
func (v *vmm) qmpReady() error {
	v.qmp.SetDeadline(time.Now().Add(30 * time.Second))
	defer v.qmp.SetDeadline(time.Time{})
	var m map[string]json.RawMessage
	if err := v.dec.Decode(&m); err != nil {
		return fmt.Errorf("greeting: %v", err)
	}
	if _, ok := m["QMP"]; !ok {
		return fmt.Errorf("no QMP greeting: %v", m)
	}
	_, err := v.command(`{"execute":"qmp_capabilities"}`)
	return err
}

// command sends one QMP command and returns its "return" value.
func (v *vmm) command(cmd string) (json.RawMessage, error) {
	v.qmp.SetDeadline(time.Now().Add(30 * time.Second))
	defer v.qmp.SetDeadline(time.Time{})
	if _, err := io.WriteString(v.qmp, cmd+"\n"); err != nil {
		return nil, err
	}
	for {
		var m map[string]json.RawMessage
		if err := v.dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("%s: %v", cmd, err)
		}
		if r, ok := m["return"]; ok {
			return r, nil
		}
		if e, ok := m["error"]; ok {
			return nil, fmt.Errorf("%s: %s", cmd, e)
		}
	}
}

// banner waits for the kernel's "Linux version" line on the console.
func (v *vmm) banner() (string, error) {
	ch := make(chan string, 1)
	go func() {
		for {
			line, err := v.console.ReadString('\n')
			if strings.Contains(line, "Linux version") {
				ch <- strings.TrimSpace(line)
				return
			}
			if err != nil {
				ch <- ""
				return
			}
		}
	}()
	select {
	case l := <-ch:
		if l == "" {
			return "", fmt.Errorf("console closed before the kernel banner")
		}
		return l, nil
	case <-time.After(bannerWait):
		return "", fmt.Errorf("no kernel banner within %v", bannerWait)
	}
}

// TestQEMU boots the guest kernel in a confined QEMU with its own
// -sandbox on top of the jail's filter, up to the kernel banner.
func TestQEMU(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	// The disk is root's, mode 0600, and not bound into the jail: QEMU
	// reaches it only through the descriptor.
	diskPath := filepath.Join(t.TempDir(), "disk.raw")
	disk, err := os.OpenFile(diskPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	if err := disk.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	v := startQEMU(t, true, uid, disk)
	defer v.stop()
	if err := v.qmpReady(); err != nil {
		t.Fatalf("QMP: %v", err)
	}
	out, err := v.command(`{"execute":"human-monitor-command","arguments":{"command-line":"qemu-io d0 \"write -P 0xab 4096 4096\""}}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("qemu-io: %s", out)
	got := make([]byte, 4096)
	if _, err := disk.ReadAt(got, 4096); err != nil || strings.Count(string(got), "\xab") != 4096 {
		t.Errorf("QEMU did not write the disk through its descriptor (%v): %q...", err, got[:16])
	}
	st := procStatus(t, v.pid)
	t.Logf("QEMU pid %d: Uid %s, Gid %s, NoNewPrivs %s, Seccomp %s, Seccomp_filters %s, CapEff %s",
		v.pid, st["Uid"], st["Gid"], st["NoNewPrivs"], st["Seccomp"], st["Seccomp_filters"], st["CapEff"])
	if !strings.HasPrefix(st["Uid"], strconv.Itoa(int(uid))+" ") || st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" {
		t.Errorf("QEMU is not confined: %v", st)
	}
	// Ours plus QEMU's own -sandbox (Seccomp_filters needs Linux 5.9).
	if n, err := strconv.Atoi(st["Seccomp_filters"]); err == nil && n < 2 {
		t.Errorf("Seccomp_filters %d, want the jail's and QEMU's own", n)
	}
	line, err := v.banner()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console: %s", line)
	// Without a root file system the guest panics, and with panic=-1 and
	// -no-reboot QEMU then exits by itself, status 0: the whole boot and
	// QEMU's exit path ran under both filters.
	go io.Copy(io.Discard, v.console)
	done := make(chan error, 1)
	go func() { done <- v.wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("QEMU exited with %v, want status 0 after the guest's panic", err)
		}
	case <-time.After(bannerWait):
		t.Errorf("QEMU still runs %v after the banner; the guest should have panicked and QEMU exited", bannerWait)
	}
}

// BenchmarkQEMUStart measures the jail's cost on QEMU's start: from fork
// to the first QMP answer, and to the kernel banner (TCG), plain and jailed
// runs interleaved so that load from elsewhere hits both alike.
func BenchmarkQEMUStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root")
	}
	var qmp, banner [2]time.Duration
	for i := 0; i < b.N; i++ {
		for j, jailed := range []bool{false, true} {
			uid, release, err := jail.AllocUID(uidStateDir(b), jail.UIDRangeLo, jail.UIDRangeHi)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			v := startQEMU(b, jailed, uid, nil)
			if err := v.qmpReady(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := v.banner(); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			v.stop()
			release()
			qmp[j] += t1.Sub(t0)
			banner[j] += t2.Sub(t0)
			b.Logf("jailed=%v qmp %v banner %v", jailed, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t0).Round(time.Millisecond))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(qmp[0]), "plain-ms-to-qmp")
	b.ReportMetric(ms(qmp[1]), "jailed-ms-to-qmp")
	b.ReportMetric(ms(banner[0]), "plain-ms-to-banner")
	b.ReportMetric(ms(banner[1]), "jailed-ms-to-banner")
}

// BenchmarkTrue is the jail's own cost: /bin/true from fork to reaped,
// plain and jailed (every layer, a cgroup included).
func BenchmarkTrue(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root")
	}
	var d [2]time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		c, err := jail.Command("", jail.Spec{Path: "/bin/true", Args: []string{"true"}, UID: jail.UIDRangeHi, GID: jail.UIDRangeHi,
			Devices: []string{"/dev/null"}, Cgroup: &jail.CgroupSpec{Name: testCgroupPrefix + "true", MemoryMaxBytes: 64 << 20, PidsMax: 16, CPUWeight: 100}})
		if err == nil {
			err = c.Start()
		}
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		d[0] += t1.Sub(t0)
		d[1] += t2.Sub(t1)
	}
	b.ReportMetric(float64(d[0].Microseconds())/1000/float64(b.N), "plain-ms")
	b.ReportMetric(float64(d[1].Microseconds())/1000/float64(b.N), "jailed-ms")
}
