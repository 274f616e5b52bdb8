package integration

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Majors the VM's virtio-blk disks may have (the kernel picks one of the
// dynamic majors at boot): the nodes are planted for each, and the test
// checks that the box's real disks are among them.
var virtioBlkMajors = []int64{254, 253, 252}

// guestNodes are the device nodes a hostile image or disk would ship: the
// VM's raw disks (the layers, the box's writable disk, the copy lane), the
// kernel log, the console and physical memory.
func guestNodes() map[string][3]int64 { // name -> type ('b' or 'c'), major, minor
	nodes := map[string][3]int64{"kmsg": {'c', 1, 11}, "console": {'c', 5, 1}, "mem": {'c', 1, 1}, "port": {'c', 1, 4}}
	for _, maj := range virtioBlkMajors {
		for i, d := range []string{"a", "b", "c", "d"} {
			nodes[fmt.Sprintf("vd%s-%d", d, maj)] = [3]int64{'b', maj, int64(16 * i)}
		}
	}
	return nodes
}

// TestImageDeviceNodes boots one box whose image ships device nodes (in a
// layer, beside both forms of whiteout) and whose writable disk was given
// more by hand, as a hostile box archive's disk would be: the image's nodes
// are not in the box at all, the disk's cannot be opened (the box root is
// nodev), nothing reaches the console log, the whiteouts still delete, and
// the sandbox's own /dev works.
func TestImageDeviceNodes(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("planting device nodes on the box's disk needs root (mknod)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	marker := fmt.Sprintf("BOXLITE-DEVICE-ESCAPE-%d", os.Getpid())

	var devs []layerEntry
	for name, n := range guestNodes() {
		typ := byte(tar.TypeChar)
		if n[0] == 'b' {
			typ = tar.TypeBlock
		}
		devs = append(devs, ent(typ, "devs/"+name, 0o666, devno(n[1], n[2])))
	}
	devs = append(devs,
		ent(tar.TypeBlock, "dev/vda", 0o666, devno(254, 0)), // under the sandbox's /dev: hidden anyway
		hardlink("devs/disk", "devs/vda-254"),
		whiteout("etc/.wh.deleted-oci"),
		ent(tar.TypeChar, "etc/deleted-overlay", 0, devno(0, 0)), // the overlay form of a whiteout
	)
	loadLayered(t, "boxlite-test/devices:latest", [][]byte{
		tarOf(t, []layerEntry{dir("devs/", 0o755), dir("etc/", 0o755),
			file("etc/deleted-oci", 0o644, "x"), file("etc/deleted-overlay", 0o644, "x"), file("etc/kept", 0o644, "kept")}, t0),
		tarOf(t, append([]layerEntry{dir("devs/", 0o755), dir("dev/", 0o755), dir("etc/", 0o755)}, devs...), t0+1000),
	})

	b, err := rt.Create(ctx, "boxlite-test/devices", boxlite.WithDiskSizeGB(1))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	plantDisk(t, filepath.Join(b.Info().Dir, shimapi.DiskFile), 1)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}

	var paths []string
	for name := range guestNodes() {
		paths = append(paths, "/devs/"+name, "/planted/"+name)
	}
	script := `
for n in ` + strings.Join(paths, " ") + ` /devs/disk; do
	if [ -e $n ]; then echo "present $n"; fi
	if [ -b $n ] || [ -c $n ]; then
		(exec 3<$n) 2>/dev/null && echo "opened $n"
		(exec 3<>$n) 2>/dev/null && echo "opened-rw $n"
		case $n in
		*/kmsg|*/console) (printf '` + marker + `\n' >>$n) 2>/dev/null && echo "wrote $n";;
		esac
	fi
done
for f in /etc/deleted-oci /etc/deleted-overlay; do [ -e $f ] && echo "not deleted $f"; done
echo "kept $(cat /etc/kept)"
echo "root $(awk '$5 == "/" {print $6}' /proc/self/mountinfo)"
echo "null $(echo x >/dev/null && echo ok)"
echo "urandom $(head -c 8 /dev/urandom | wc -c)"
for d in /sys/block/vd*; do echo "disk $(cat $d/dev)"; done
`
	res := runIn(t, b, sh(script))
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	out := string(res.Stdout)
	t.Logf("in the box:\n%s", out)
	planted := 0
	disks := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		verb, arg, _ := strings.Cut(line, " ")
		switch verb {
		case "present":
			if strings.HasPrefix(arg, "/devs/") {
				t.Errorf("the image's device node %s is in the box", arg)
			} else {
				planted++
			}
		case "opened", "opened-rw", "wrote", "not":
			t.Errorf("%s", line)
		case "kept":
			if arg != "kept" {
				t.Errorf("%s: the lower layer's file is lost", line)
			}
		case "root":
			if !strings.Contains(","+arg+",", ",nodev,") {
				t.Errorf("the box root is mounted %s, without nodev", arg)
			}
			if strings.Contains(","+arg+",", ",nosuid,") {
				t.Errorf("the box root is mounted %s: set-id programs of the image would not work", arg)
			}
		case "null", "urandom":
			if arg != "ok" && arg != "8" {
				t.Errorf("the sandbox's /dev: %s", line)
			}
		case "disk":
			disks++
			maj, min, _ := strings.Cut(arg, ":")
			if _, ok := guestNodes()[fmt.Sprintf("vd%c-%s", 'a'+rune(atoi(t, min)/16), maj)]; !ok && atoi(t, min) < 64 {
				t.Errorf("the box's disk %s has no planted node: add its major to virtioBlkMajors", arg)
			}
		}
	}
	if planted != len(guestNodes()) || disks < 2 {
		t.Errorf("%d of %d planted nodes seen on the box's disk, %d disks: the test tested nothing", planted, len(guestNodes()), disks)
	}
	if log, err := os.ReadFile(filepath.Join(b.Info().Dir, shimapi.ConsoleFile)); err != nil {
		t.Error(err)
	} else if strings.Contains(string(log), marker) {
		t.Errorf("the box wrote to the console log through a device node")
	}
}

// plantDisk makes the box's writable disk before its first start, as a
// hostile archive's disk could be: its upper directory holds device nodes
// for the VM's disks and console (under /planted in the box).
func plantDisk(t *testing.T, disk string, sizeGB int) {
	t.Helper()
	src := t.TempDir()
	dir := filepath.Join(src, "upper", "planted")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range guestNodes() {
		mode := uint32(unix.S_IFCHR)
		if n[0] == 'b' {
			mode = unix.S_IFBLK
		}
		if err := unix.Mknod(filepath.Join(dir, name), mode|0o666, int(unix.Mkdev(uint32(n[1]), uint32(n[2])))); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(disk, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(int64(sizeGB) << 30)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		mkfs = "/sbin/mkfs.ext4"
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-L", "boxlite-rw", "-d", src, disk).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 -d: %v\n%s", err, out)
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
