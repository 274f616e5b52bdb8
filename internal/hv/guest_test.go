package hv

// Test fixtures: a tiny initramfs (static busybox, the virtio modules of the
// test kernel, and an /init script) written by a small cpio "newc" writer, so
// the tests need neither root nor the cpio tool.

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const defaultTestBusybox = "/bin/busybox"

// envKernel names a guest kernel directory as guest/fetch-kernel.sh or
// guest/kernel/build.sh make it (vmlinuz, modules/); `make test-go` sets it. Without it these tests fail: a QEMU test
// that skips would pass having tested nothing.
const envKernel = "BOXLITE_GUEST_KERNEL"

// guestModules are loaded by /init in this order (dependencies first).
var guestModules = []string{
	"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_blk",
	"pvpanic", "pvpanic-mmio",
}

// testInit is the guest's PID 1. The mode comes from boxlite.test= on the
// kernel command line: "echo" (default) sends READY, echoes one line from the
// host to the console and reboots; "hang" stays up after the echo; "panic"
// crashes the kernel after loading the modules; "count" answers each line
// from the host with "N=<lines so far> <line>", for as long as it runs.
const testInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs dev /dev
mount -t proc proc /proc
mount -t sysfs sys /sys
echo "BOXLITE-TEST-INIT up=$(cut -d' ' -f1 /proc/uptime)"
for m in ` + "MODULES" + `; do insmod /lib/modules/$m.ko || echo "insmod $m failed"; done
mode=echo
for a in $(cat /proc/cmdline); do case $a in boxlite.test=*) mode=${a#boxlite.test=};; esac; done
if [ "$mode" = panic ]; then echo c > /proc/sysrq-trigger; fi
disks=""
for b in /sys/block/vd*; do [ -e "$b" ] && disks="$disks ${b##*/}=$(cat $b/serial):ro$(cat $b/ro)"; done
# virtio-serial announces ports (and then their names) asynchronously.
port=""
i=0
while [ -z "$port" ] && [ $i -lt 500 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ "$(cat $p/name 2>/dev/null)" = boxlite.agent ] && port=/dev/${p##*/}
  done
  [ -n "$port" ] && [ -c "$port" ] || { port=""; sleep 0.01; i=$((i+1)); }
done
echo "agent port: $port"
exec 3<>"$port"
echo "READY port=$port$disks up=$(cut -d' ' -f1 /proc/uptime)" >&3
if [ "$mode" = count ]; then n=0; while read -r line <&3; do n=$((n+1)); echo "N=$n $line" >&3; done; fi
read -r line <&3
echo "GOT: $line"
if [ "$mode" = hang ]; then while :; do sleep 3600; done; fi
reboot -f
`

type cpioEntry struct {
	name  string
	mode  uint32 // including the file type bits
	data  []byte
	major uint32 // of a device node
	minor uint32
}

// writeCPIO writes entries as a cpio "newc" archive, as the kernel unpacks it.
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	pad := func(n int) []byte { return make([]byte, (4-n%4)%4) }
	var buf bytes.Buffer
	for i, e := range append(entries, cpioEntry{name: "TRAILER!!!"}) {
		nlink := 1
		if e.mode&0o170000 == 0o040000 {
			nlink = 2
		}
		ino := i + 1
		if e.name == "TRAILER!!!" {
			ino = 0
		}
		fmt.Fprintf(&buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.major, e.minor, len(e.name)+1, 0)
		buf.WriteString(e.name)
		buf.WriteByte(0)
		buf.Write(pad(110 + len(e.name) + 1))
		buf.Write(e.data)
		buf.Write(pad(len(e.data)))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type fixture struct {
	kernel string
	initrd string
	layer  string // read-only disk image shared by all tests
	err    error
}

var (
	fixtureOnce sync.Once
	theFixture  fixture
	fixtureDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// guest returns the shared kernel, initramfs and read-only layer image; a
// missing input fails the test.
func guest(t testing.TB) fixture {
	t.Helper()
	fixtureOnce.Do(func() { theFixture = buildFixture() })
	f := theFixture
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f
}

func buildFixture() fixture {
	fail := func(format string, a ...any) fixture { return fixture{err: fmt.Errorf(format, a...)} }
	dir := os.Getenv(envKernel)
	if dir == "" {
		return fail("%s is not set: it names the guest kernel directory from guest/fetch-kernel.sh (make test-go sets it)", envKernel)
	}
	kernel, modDir := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "modules")
	if _, err := os.Stat(kernel); err != nil {
		return fail("guest kernel (%s): %v", envKernel, err)
	}
	busybox := envOr("BOXLITE_TEST_BUSYBOX", defaultTestBusybox)

	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fail("busybox (set BOXLITE_TEST_BUSYBOX; Debian: busybox-static): %v", err)
	}
	if ef, err := elf.NewFile(bytes.NewReader(bb)); err != nil {
		return fail("busybox %s: %v", busybox, err)
	} else {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				return fail("busybox %s is dynamically linked; need a static one (busybox-static)", busybox)
			}
		}
	}
	found := map[string]string{}
	filepath.WalkDir(modDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".ko") {
			found[strings.TrimSuffix(d.Name(), ".ko")] = path
		}
		return nil
	})
	entries := []cpioEntry{
		{name: "bin", mode: 0o040755},
		{name: "dev", mode: 0o040755},
		{name: "dev/console", mode: 0o020600, major: 5, minor: 1},
		{name: "lib", mode: 0o040755},
		{name: "lib/modules", mode: 0o040755},
		{name: "proc", mode: 0o040755},
		{name: "sys", mode: 0o040755},
		{name: "bin/busybox", mode: 0o100755, data: bb},
	}
	// A kernel without modules (boxlite's, guest/kernel/) has them built in.
	var mods []string
	for _, m := range guestModules {
		p, ok := found[m]
		if !ok {
			if len(found) == 0 {
				continue
			}
			return fail("module %s.ko not found under %s (guest/fetch-kernel.sh copies it)", m, modDir)
		}
		mods = append(mods, m)
		b, err := os.ReadFile(p)
		if err != nil {
			return fail("%v", err)
		}
		entries = append(entries, cpioEntry{name: "lib/modules/" + m + ".ko", mode: 0o100644, data: b})
	}
	entries = append(entries, cpioEntry{name: "init", mode: 0o100755, data: []byte(strings.Replace(testInit, "MODULES", strings.Join(mods, " "), 1))})

	tmp, err := os.MkdirTemp("", "hv-test-")
	if err != nil {
		return fail("%v", err)
	}
	fixtureDir = tmp
	var cpio bytes.Buffer
	if err := writeCPIO(&cpio, entries); err != nil {
		return fail("cpio: %v", err)
	}
	initrd := filepath.Join(tmp, "initrd.cpio")
	if err := os.WriteFile(initrd, cpio.Bytes(), 0o644); err != nil {
		return fail("%v", err)
	}
	layer := filepath.Join(tmp, "layer0.img")
	if err := os.WriteFile(layer, make([]byte, 1<<20), 0o444); err != nil {
		return fail("%v", err)
	}
	return fixture{kernel: kernel, initrd: initrd, layer: layer}
}
