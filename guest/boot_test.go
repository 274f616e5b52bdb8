package guest_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/guest/internal/testhost"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
)

// TestBoot boots the real guest under QEMU (TCG is fine): an initramfs with
// the agent, two busybox layers and a writable disk. It needs
// BOXLITE_GUEST_KERNEL (a directory made by fetch-kernel.sh or kernel/build.sh), qemu-system-x86_64,
// cpio, mkfs.ext4 and a static /bin/busybox (`make test-go` has them all); it
// fails without them, so that it never passes having booted nothing.
func TestBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots VMs")
	}
	kdir := os.Getenv("BOXLITE_GUEST_KERNEL")
	if kdir == "" {
		t.Fatal("BOXLITE_GUEST_KERNEL is not set (make test-go sets it; or run guest/fetch-kernel.sh DIR)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "cpio", "mkfs.ext4", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (make setup installs it)", tool)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatal("no /bin/busybox (make setup installs busybox-static)")
	}
	dir := t.TempDir()
	initrd := buildInitramfs(t, dir, kdir)
	layer0, layer1 := buildLayers(t, dir)
	rw := filepath.Join(dir, "rw.ext4")
	mkfs(t, rw, "", "64M")

	kver, kerr := os.ReadFile(filepath.Join(kdir, "kernel.version"))
	if kerr != nil {
		t.Fatal(kerr)
	}
	release := strings.TrimSpace(string(kver))

	disks := []disk{{layer0, "layer0", true}, {layer1, "layer1", true}, {rw, "rw", false}}
	vm := boot(t, dir, kdir, initrd, disks)
	h := vm.host
	if vm.hello.Layers != 2 || !vm.hello.WritableDisk || !strings.HasPrefix(vm.hello.Kernel, release+" ") {
		t.Fatalf("hello %+v", vm.hello)
	}
	run := func(e protocol.Exec) testhost.Result {
		t.Helper()
		if e.Env == nil {
			e.Env = []string{"PATH=/bin"}
		}
		res, err := h.Run(e, nil, 30*time.Second)
		if err != nil {
			t.Fatalf("%q: %v\n%s", e.Argv, err, vm.console())
		}
		return res
	}
	res := run(protocol.Exec{Argv: []string{"uname", "-a"}})
	if res.Exit == nil || res.Exit.Code != 0 || !strings.Contains(string(res.Stdout), release) {
		t.Fatalf("uname: %+v %q %v", res.Exit, res.Stdout, res.Err)
	}
	t.Logf("uname -a: %s", bytes.TrimSpace(res.Stdout))
	res = run(protocol.Exec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if res.Exit == nil || res.Exit.Code != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("sh: %+v %q %q %v", res.Exit, res.Stdout, res.Stderr, res.Err)
	}
	// Layers stack in order, whiteouts hide, the kernel file systems are
	// there, users resolve in the box, and the process is chrooted.
	res = run(protocol.Exec{Argv: []string{"sh", "-c", `cat /etc/motd; test -e /etc/gone && echo gone-is-visible
		id; cd /proc/self && pwd; ls /dev/null /dev/pts/ptmx >/dev/null && echo devs; test -e /init || echo chrooted`}, User: "guest"})
	want := "layer1\nuid=1000(guest) gid=1000(guest) groups=100(users)\n/proc/self\ndevs\nchrooted\n"
	if res.Exit == nil || res.Exit.Code != 0 || string(res.Stdout) != want {
		t.Fatalf("box view: %+v\n%s\nwant\n%s\nstderr %q", res.Exit, res.Stdout, want, res.Stderr)
	}
	// 5 MB out through the real channel under flow control, stdin in,
	// concurrent execs.
	t0 := time.Now()
	res = run(protocol.Exec{Argv: []string{"seq", "1", "700000"}})
	var want5 bytes.Buffer
	for i := 1; i <= 700000; i++ {
		want5.WriteString(strconv.Itoa(i) + "\n")
	}
	if res.Exit == nil || res.Exit.Code != 0 || !bytes.Equal(res.Stdout, want5.Bytes()) {
		t.Fatalf("seq: %+v, %d bytes (want %d)", res.Exit, len(res.Stdout), want5.Len())
	}
	t.Logf("seq: %d bytes in %v", len(res.Stdout), time.Since(t0).Round(time.Millisecond))
	in := bytes.Repeat([]byte("stdin!"), 40000)
	res, err := h.Run(protocol.Exec{Argv: []string{"wc", "-c"}, Env: []string{"PATH=/bin"}}, in, 30*time.Second)
	if err != nil || res.Exit == nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(len(in)) {
		t.Fatalf("stdin: %+v %q %v %v", res.Exit, res.Stdout, res.Err, err)
	}
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		go func(i int) {
			r, err := h.Run(protocol.Exec{Argv: []string{"sh", "-c", fmt.Sprintf("seq 1 2000 | sed s/^/%d-/", i)}, Env: []string{"PATH=/bin"}}, nil, 30*time.Second)
			if err == nil && (r.Exit == nil || r.Exit.Code != 0 || !strings.HasSuffix(string(r.Stdout), fmt.Sprintf("\n%d-2000\n", i)) || bytes.Count(r.Stdout, []byte("\n")) != 2000) {
				err = fmt.Errorf("exec %d: %+v %v %d bytes", i, r.Exit, r.Err, len(r.Stdout))
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 10; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Orphans are reaped by the agent: no zombies pile up.
	res = run(protocol.Exec{Argv: []string{"sh", "-c", `(sleep 0.1 &); sleep 0.5; cat /proc/[0-9]*/stat | awk '$3 == "Z"' | wc -l`}})
	if res.Exit == nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("zombies: %+v %q %q", res.Exit, res.Stdout, res.Stderr)
	}
	res = run(protocol.Exec{Argv: []string{"nosuch"}})
	if !errors.Is(res.Err, errdefs.ErrNotFound) {
		t.Fatalf("nosuch: %+v %v", res.Exit, res.Err)
	}
	res = run(protocol.Exec{Argv: []string{"sh", "-c", "echo kept > /persist.txt && sync"}})
	if res.Exit == nil || res.Exit.Code != 0 {
		t.Fatalf("write: %+v %v %q", res.Exit, res.Err, res.Stderr)
	}
	vm.shutdown(t)
	// The writable disk was unmounted cleanly.
	if out, err := exec.Command("e2fsck", "-fn", rw).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck after shutdown: %v\n%s", err, out)
	}

	vm = boot(t, dir, kdir, initrd, disks)
	res, err = vm.host.Run(protocol.Exec{Argv: []string{"cat", "/persist.txt"}, Env: []string{"PATH=/bin"}}, nil, 30*time.Second)
	if err != nil || res.Exit == nil || string(res.Stdout) != "kept\n" {
		t.Fatalf("after reboot: %+v %q %v %v", res.Exit, res.Stdout, res.Err, err)
	}
	vm.shutdown(t)

	// Without a writable disk the upper layer is a tmpfs.
	vm = boot(t, dir, kdir, initrd, []disk{{layer0, "layer0", true}})
	if vm.hello.Layers != 1 || vm.hello.WritableDisk {
		t.Fatalf("hello %+v", vm.hello)
	}
	res, err = vm.host.Run(protocol.Exec{Argv: []string{"sh", "-c", "echo x > /f && cat /f /etc/motd"}, Env: []string{"PATH=/bin"}}, nil, 30*time.Second)
	if err != nil || res.Exit == nil || string(res.Stdout) != "x\nlayer0\n" {
		t.Fatalf("tmpfs upper: %+v %q %q %v %v", res.Exit, res.Stdout, res.Stderr, res.Err, err)
	}
	vm.shutdown(t)

	// A box that cannot boot says why, on the channel and on the console.
	bad := filepath.Join(dir, "bad.img")
	if err := os.WriteFile(bad, bytes.Repeat([]byte{0xAB}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	vm = start(t, dir, kdir, initrd, []disk{{bad, "layer0", true}})
	_, err = vm.host.Hello(60 * time.Second)
	if !errors.Is(err, errdefs.ErrBootFailed) || !strings.Contains(err.Error(), "layer0") {
		t.Fatalf("bad layer: hello error %v\n%s", err, vm.console())
	}
	vm.wait(t)
	if !strings.Contains(vm.console(), "boot failed") {
		t.Fatalf("console does not say why:\n%s", vm.console())
	}
	t.Logf("bad layer: %v", err)
}

type disk struct {
	path, serial string
	readonly     bool
}

type vm struct {
	m       *hv.VM
	conn    net.Conn
	host    *testhost.Host
	hello   protocol.Hello
	start   time.Time
	logPath string
	exited  <-chan struct{} // closed when QEMU has been reaped
}

func (v *vm) console() string {
	b, _ := os.ReadFile(v.logPath)
	lines := strings.Split(string(b), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "console:\n" + strings.Join(lines, "\n")
}

func (v *vm) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case <-v.exited:
		return time.Since(v.start)
	case <-time.After(60 * time.Second):
		t.Fatalf("VM did not exit\n%s", v.console())
	}
	return 0
}

func (v *vm) shutdown(t *testing.T) {
	t.Helper()
	sent := time.Now()
	if err := v.host.Send(protocol.TShutdown, 0, nil); err != nil {
		t.Fatal(err)
	}
	v.wait(t)
	t.Logf("shutdown to VMM exit: %v", time.Since(sent).Round(time.Millisecond))
	if !strings.Contains(v.console(), "reboot: Power down") {
		t.Logf("no power-down line on the console\n%s", v.console())
	}
}

var bootCount int

// start boots a VM through hv, as production's shim does (the same machine
// type, kernel command line and devices), and connects to the agent's port.
func start(t *testing.T, dir, kdir, initrd string, disks []disk) *vm {
	t.Helper()
	bootCount++
	v := &vm{logPath: filepath.Join(dir, fmt.Sprintf("console%d.log", bootCount)), start: time.Now()}
	cfg := hv.Config{Kernel: filepath.Join(kdir, "vmlinuz"), Initrd: initrd, MemoryMiB: 256, Channel: true, ConsoleLog: v.logPath}
	for _, d := range disks {
		cfg.Disks = append(cfg.Disks, hv.Disk{Path: d.path, Serial: d.serial, ReadOnly: d.readonly})
	}
	m, err := hv.Start(cfg)
	if err != nil {
		t.Fatalf("start the VM: %v", err)
	}
	// hv reaps QEMU; the cleanup kills what is left, with a deadline on the wait.
	t.Cleanup(func() {
		m.Kill()
		select {
		case <-m.Done():
		case <-time.After(30 * time.Second):
			t.Errorf("QEMU (pid %d) not reaped 30 s after SIGKILL", m.Pid())
		}
	})
	v.m, v.exited, v.conn = m, m.Done(), m.Channel()
	v.host = testhost.New(v.conn)
	return v
}

func boot(t *testing.T, dir, kdir, initrd string, disks []disk) *vm {
	t.Helper()
	v := start(t, dir, kdir, initrd, disks)
	hello, err := v.host.Hello(60 * time.Second)
	if err != nil {
		t.Fatalf("hello: %v\n%s", err, v.console())
	}
	v.hello = hello
	if b, err := os.ReadFile(v.logPath); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "boxlite-agent: ready") {
				t.Logf("console: %s", line)
			}
		}
	}
	t.Logf("boot %d: hello after %v wall; guest: agent started at %.0f ms, ready at %.0f ms (%s)",
		bootCount, time.Since(v.start).Round(time.Millisecond), hello.KernelMs, hello.ReadyMs, hello.Agent)
	return v
}

func buildInitramfs(t *testing.T, dir, kdir string) string {
	t.Helper()
	agent := filepath.Join(dir, "boxlite-agent")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", agent, "../cmd/boxlite-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	initrd := filepath.Join(dir, "initrd")
	if out, err := exec.Command("./mkinitramfs.sh", agent, filepath.Join(kdir, "modules"), initrd).CombinedOutput(); err != nil {
		t.Fatalf("mkinitramfs: %v\n%s", err, out)
	}
	if fi, err := os.Stat(initrd); err == nil {
		t.Logf("initramfs: %d bytes", fi.Size())
	}
	return initrd
}

func mkfs(t *testing.T, img, from, size string) {
	t.Helper()
	args := []string{"-q", "-F", "-t", "ext4"}
	if from != "" {
		args = append(args, "-d", from)
	}
	args = append(args, img, size)
	if out, err := exec.Command("mkfs.ext4", args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
}

// buildLayers makes a busybox layer and a second layer on top that replaces
// /etc/motd and whites out /etc/gone (an overlay whiteout needs mknod, so
// only as root).
func buildLayers(t *testing.T, dir string) (string, string) {
	t.Helper()
	l0 := filepath.Join(dir, "l0")
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(l0, "bin", "busybox"), string(bb), 0o755)
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(l0, "bin", applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(filepath.Join(l0, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\nguest:x:1000:1000::/home/guest:/bin/sh\n", 0o644)
	write(filepath.Join(l0, "etc", "group"), "root:x:0:\nusers:x:100:guest\nguest:x:1000:\n", 0o644)
	write(filepath.Join(l0, "etc", "motd"), "layer0\n", 0o644)
	for _, d := range []string{"root", "tmp", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(l0, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l1 := filepath.Join(dir, "l1")
	write(filepath.Join(l1, "etc", "motd"), "layer1\n", 0o644)
	if os.Geteuid() == 0 {
		write(filepath.Join(l0, "etc", "gone"), "should be hidden\n", 0o644)
		if err := unix.Mknod(filepath.Join(l1, "etc", "gone"), unix.S_IFCHR|0o000, 0); err != nil {
			t.Fatal(err)
		}
	}
	img0, img1 := filepath.Join(dir, "layer0.ext4"), filepath.Join(dir, "layer1.ext4")
	mkfs(t, img0, l0, "16M")
	mkfs(t, img1, l1, "4M")
	return img0, img1
}
