package hv

import (
	"bufio"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Deadlines only catch hangs; timing never decides a verdict.
const (
	bootDeadline = 90 * time.Second
	exitDeadline = 60 * time.Second
)

// box is one test VM with its agent socket.
type box struct {
	vm      *VM
	console string
	rw      string
	start   time.Time
	started time.Duration // how long Start took
}

// startBox starts a VM on the test initramfs with the shared read-only layer
// (serial "layer0") and a fresh writable disk (serial "rw"). The VM is
// killed when the test ends.
func startBox(t testing.TB, mode string) *box {
	t.Helper()
	g := guest(t)
	dir := t.TempDir()
	b := &box{console: filepath.Join(dir, "console.log"), rw: filepath.Join(dir, "rw.img")}
	if err := os.WriteFile(b.rw, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start = time.Now()
	vm, err := Start(b.config(g, mode))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	b.started = time.Since(b.start)
	t.Cleanup(func() {
		vm.Kill()
		if t.Failed() {
			t.Logf("console of the failed VM:\n%s", shimapi.ConsoleTail(b.console, 4096))
		}
	})
	b.vm = vm
	return b
}

func (b *box) config(g fixture, mode string) Config {
	return Config{
		Kernel:     g.kernel,
		Initrd:     g.initrd,
		Cmdline:    "boxlite.test=" + mode,
		Disks:      []Disk{{Path: g.layer, Serial: "layer0", ReadOnly: true}, {Path: b.rw, Serial: "rw"}},
		Channel:    true,
		ConsoleLog: b.console,
		Accel:      TCG,
	}
}

// accept is the host end of the agent port.
func (b *box) accept(t testing.TB) *net.UnixConn {
	t.Helper()
	c, ok := b.vm.Channel().(*net.UnixConn)
	if !ok {
		t.Fatalf("VM.Channel is %T, want a *net.UnixConn", b.vm.Channel())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ready reads the guest's READY line.
func (b *box) ready(t testing.TB, c *net.UnixConn, r *bufio.Reader) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bootDeadline))
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read READY (%v after Start): %v", time.Since(b.start), err)
	}
	c.SetReadDeadline(time.Time{})
	if !strings.HasPrefix(line, "READY ") {
		t.Fatalf("guest said %q, want READY ...", line)
	}
	return strings.TrimSpace(line)
}

func waitDone(t testing.TB, vm *VM, d time.Duration) {
	t.Helper()
	select {
	case <-vm.Done():
	case <-time.After(d):
		t.Fatalf("qemu (pid %d) still running after %v", vm.Pid(), d)
	}
}

// TestBoot is the whole round trip: boot, READY with disk serials over the
// agent port, a line back from the host, and a guest reboot that ends QEMU.
func TestBoot(t *testing.T) {
	t.Parallel()
	b := startBox(t, "echo")
	c := b.accept(t)
	r := bufio.NewReader(c)
	line := b.ready(t, c, r)
	tReady := time.Since(b.start)
	t.Logf("guest: %s", line)

	// Disks appear in command-line order and carry their serials; the
	// read-only one is read-only in the guest.
	fields := strings.Fields(line)
	want := map[string]bool{"port=/dev/vport0p1": true, "vda=layer0:ro1": true, "vdb=rw:ro0": true}
	for _, f := range fields {
		delete(want, f)
	}
	if len(want) != 0 {
		t.Errorf("READY line %q lacks %v", line, want)
	}

	if _, err := c.Write([]byte("hello from the host\n")); err != nil {
		t.Fatal(err)
	}
	waitDone(t, b.vm, exitDeadline)
	tExit := time.Since(b.start)
	if err := b.vm.Err(); err != nil {
		t.Errorf("Err after guest reboot = %v, want nil", err)
	}
	if err := b.vm.Kill(); err != nil {
		t.Errorf("Kill after exit = %v, want nil", err)
	}
	con := shimapi.ConsoleTail(b.console, 0)
	if !strings.Contains(con, "GOT: hello from the host") {
		t.Errorf("console lacks the echoed line:\n%s", con)
	}
	t.Logf("Start returned after %v; Start to READY %v, to QEMU exit %v (READY to exit %v)",
		b.started.Round(time.Millisecond), tReady.Round(time.Millisecond), tExit.Round(time.Millisecond),
		(tExit - tReady).Round(time.Millisecond))
	t.Logf("args: %q", b.vm.Args())
}

// TestKill kills a running VM. While it runs, a second VM on the same
// writable disk must fail to start with QEMU's own message (image locking),
// and both share the read-only layer with TestBoot.
func TestKill(t *testing.T) {
	t.Parallel()
	b := startBox(t, "hang")
	c := b.accept(t)
	r := bufio.NewReader(c)
	b.ready(t, c, r)
	if _, err := c.Write([]byte("stay\n")); err != nil {
		t.Fatal(err)
	}

	_, err := Start(b.config(guest(t), "hang"))
	t.Logf("second VM on the same rw disk: %v", err)
	if !errors.Is(err, errdefs.ErrBootFailed) || !strings.Contains(err.Error(), `Failed to get "write" lock`) {
		t.Errorf("second VM on the same rw disk: err = %v, want ErrBootFailed with QEMU's lock message", err)
	}

	select {
	case <-b.vm.Done():
		t.Fatalf("VM exited on its own: %v", b.vm.Err())
	default:
	}
	pid := b.vm.Pid()
	t0 := time.Now()
	if err := b.vm.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	t.Logf("Kill took %v", time.Since(t0).Round(time.Microsecond))
	select {
	case <-b.vm.Done():
	default:
		t.Fatal("Done not closed after Kill returned")
	}
	if err := b.vm.Err(); !errors.Is(err, errdefs.ErrClosed) {
		t.Errorf("Err after Kill = %v, want ErrClosed", err)
	}
	if err := b.vm.Kill(); err != nil {
		t.Errorf("second Kill = %v, want nil", err)
	}
	// Reaped: no such process, and its process group is empty.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Kill = %v, want ESRCH", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0) after Kill = %v, want ESRCH", pid, err)
	}
	// The agent connection sees EOF.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("agent connection still readable after Kill")
	}
}

// TestGuestPanic: with pvpanic loaded in the guest, a kernel panic ends QEMU
// with an error that says so.
func TestGuestPanic(t *testing.T) {
	t.Parallel()
	b := startBox(t, "panic")
	b.accept(t)
	waitDone(t, b.vm, bootDeadline)
	err := b.vm.Err()
	t.Logf("Err: %v", err)
	if !errors.Is(err, errdefs.ErrInternal) || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Err = %v, want ErrInternal saying the guest panicked", err)
	}
	if con := shimapi.ConsoleTail(b.console, 0); !strings.Contains(con, "Kernel panic") {
		t.Errorf("console lacks the panic:\n%s", con)
	}
}

func TestStartQEMUFails(t *testing.T) {
	dir := t.TempDir()
	notKernel := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(notKernel, []byte("not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err := Start(Config{Kernel: notKernel, Accel: TCG})
	t.Logf("%v (after %v)", err, time.Since(t0).Round(time.Millisecond))
	if !errors.Is(err, errdefs.ErrBootFailed) || !strings.Contains(err.Error(), "invalid kernel header") {
		t.Errorf("err = %v, want ErrBootFailed with QEMU's message", err)
	}

}

func TestStartBadConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name  string
		cfg   Config
		kind  error
		field string
	}{
		{"no kernel", Config{}, errdefs.ErrInvalidArgument, "Config.Kernel"},
		{"missing kernel", Config{Kernel: missing}, errdefs.ErrNotFound, "Config.Kernel"},
		{"kernel is a dir", Config{Kernel: dir}, errdefs.ErrInvalidArgument, "Config.Kernel"},
		{"missing initrd", Config{Kernel: file, Initrd: missing}, errdefs.ErrNotFound, "Config.Initrd"},
		{"missing qemu", Config{QEMU: "no-such-qemu-binary", Kernel: file}, errdefs.ErrNotFound, "Config.QEMU"},
		{"memory", Config{Kernel: file, MemoryMiB: 8}, errdefs.ErrInvalidArgument, "Config.MemoryMiB"},
		{"negative cpus", Config{Kernel: file, CPUs: -1}, errdefs.ErrInvalidArgument, "Config.CPUs"},
		{"accel", Config{Kernel: file, Accel: "hvf"}, errdefs.ErrInvalidArgument, "Config.Accel"},
		{"missing disk", Config{Kernel: file, Disks: []Disk{{Path: file}, {Path: missing}}}, errdefs.ErrNotFound, "Config.Disks[1].Path"},
		{"empty disk path", Config{Kernel: file, Disks: []Disk{{}}}, errdefs.ErrInvalidArgument, "Config.Disks[0].Path"},
		{"serial chars", Config{Kernel: file, Disks: []Disk{{Path: file, Serial: "a,b"}}}, errdefs.ErrInvalidArgument, "Config.Disks[0].Serial"},
		{"serial length", Config{Kernel: file, Disks: []Disk{{Path: file, Serial: strings.Repeat("s", 21)}}}, errdefs.ErrInvalidArgument, "Config.Disks[0].Serial"},
		{"serial dup", Config{Kernel: file, Disks: []Disk{{Path: file, Serial: "x"}, {Path: file, Serial: "x"}}}, errdefs.ErrInvalidArgument, "Config.Disks[1].Serial"},
		{"console dir missing", Config{Kernel: file, ConsoleLog: filepath.Join(missing, "console.log")}, errdefs.ErrNotFound, "Config.ConsoleLog"},
		{"console is a dir", Config{Kernel: file, ConsoleLog: dir}, errdefs.ErrInvalidArgument, "Config.ConsoleLog"},
		{"cmdline newline", Config{Kernel: file, Cmdline: "a\nb"}, errdefs.ErrInvalidArgument, "Config.Cmdline"},
		{"cmdline too long", Config{Kernel: file, Accel: TCG, Cmdline: strings.Repeat("x", 2100)}, errdefs.ErrInvalidArgument, "Config.Cmdline"},
	} {
		vm, err := Start(tc.cfg)
		if vm != nil {
			vm.Kill()
		}
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want %v naming %s", tc.name, err, tc.kind, tc.field)
		}
	}
}

func TestBuildArgs(t *testing.T) {
	cfg := Config{
		Kernel: "/k/vmlinuz", Initrd: "/k/initrd", Cmdline: "foo=1",
		MemoryMiB: 512, CPUs: 2, Accel: TCG,
		Disks: []Disk{
			{Path: "/img/a,b.img", Serial: "layer0", ReadOnly: true},
			{Path: "/img/rw.img", Serial: "rw"},
		},
		Channel:    true,
		ConsoleLog: "/log/console.log",
		NIC:        &NIC{MAC: "5a:94:ef:e4:0c:ee"},
	}
	args := strings.Join(buildArgs(cfg, 2300000, 3, 4, 5, 9, [][]int{{6}, {7, 8}}), " ")
	for _, want := range []string{
		"-M microvm,x-option-roms=off,isa-serial=on,rtc=on,acpi=on",
		"-nodefaults -no-user-config -display none -no-reboot",
		"-accel tcg,tb-size=32 -cpu qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+arat",
		"-m 512 -smp 2 -kernel /k/vmlinuz -initrd /k/initrd",
		"-append console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests initcall_blacklist=crypto_kdf108_init tsc_early_khz=2300000 tsc=reliable foo=1 ",
		"-chardev socket,id=con,fd=5 -serial chardev:con",
		"-device pvpanic -action panic=exit-failure",
		"-device virtio-serial-device -chardev socket,id=agent,fd=4 -device virtserialport,chardev=agent,name=boxlite.agent",
		"-add-fd fd=6,set=1 -drive id=d0,file=/dev/fdset/1,format=raw,if=none,cache=writeback,readonly=on -device virtio-blk-device,drive=d0,serial=layer0",
		"-add-fd fd=7,set=2 -add-fd fd=8,set=2 -drive id=d1,file=/dev/fdset/2,format=raw,if=none,cache=writeback,readonly=off,discard=unmap,werror=enospc,rerror=report,file.locking=off -device virtio-blk-device,drive=d1,serial=rw",
		"-chardev socket,id=qmp,fd=3 -mon chardev=qmp,mode=control",
		"-netdev dgram,id=net0,local.type=fd,local.str=9 -device virtio-net-device,netdev=net0,mac=5a:94:ef:e4:0c:ee",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}

	cfg = Config{Kernel: "/k/vmlinuz", MemoryMiB: 256, CPUs: 1, Accel: KVM}
	args = strings.Join(buildArgs(cfg, 0, 3, -1, -1, -1, nil), " ")
	for _, want := range []string{"-accel kvm -cpu host", "-append console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests initcall_blacklist=crypto_kdf108_init -chardev null,id=con"} {
		if !strings.Contains(args, want) {
			t.Errorf("kvm args lack %q:\n%s", want, args)
		}
	}
	for _, bad := range []string{"tsc_early_khz", "-initrd", "virtio-serial", "-drive", "-netdev"} {
		if strings.Contains(args, bad) {
			t.Errorf("kvm args contain %q:\n%s", bad, args)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	for _, s := range []string{"0123", "456789", "abcdefghij", "k"} {
		tl.Write([]byte(s))
	}
	if got := tl.String(); got != "defghijk" {
		t.Errorf("tail = %q, want %q", got, "defghijk")
	}
	if got := lastLines("qemu: a\r\n\nqemu: b\n", 100); got != "qemu: a; qemu: b" {
		t.Errorf("lastLines = %q", got)
	}
}

// BenchmarkBoot boots the test guest once per iteration and reports the wall
// time from Start to READY on the agent port and to QEMU's exit.
func BenchmarkBoot(b *testing.B) {
	var ready, exit, start time.Duration
	for i := 0; i < b.N; i++ {
		bx := startBox(b, "echo")
		c := bx.accept(b)
		bx.ready(b, c, bufio.NewReader(c))
		ready += time.Since(bx.start)
		c.Write([]byte("bye\n"))
		waitDone(b, bx.vm, exitDeadline)
		exit += time.Since(bx.start)
		start += bx.started
		if err := bx.vm.Err(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(start.Milliseconds())/n, "ms-start")
	b.ReportMetric(float64(ready.Milliseconds())/n, "ms-ready")
	b.ReportMetric(float64(exit.Milliseconds())/n, "ms-exit")
}
