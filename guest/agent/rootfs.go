//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Where the PID 1 agent puts things.
const (
	boxDir    = "/run/box"
	layersDir = boxDir + "/layers" // layersDir/N: layer N, read-only
	rwDir     = boxDir + "/rw"     // the writable disk, or a tmpfs: upper/ and work/
	BoxRoot   = boxDir + "/root"   // the overlay: the box's /
)

// Virtio device ids (/sys/bus/virtio/devices/*/device).
const (
	virtioBlock   = "0x0002"
	virtioConsole = "0x0003"
)

// box is the mounted root file system of the box.
type box struct {
	Root     string // "" when there are no layers
	Layers   int
	Writable bool
	mounts   []string // mount points, in mount order
}

// mount mounts on target, making it a directory first unless it is a bind
// mount of a file.
func (b *box) mount(src, target, fstype string, flags uintptr, data string) error {
	if flags&unix.MS_BIND == 0 {
		if err := ensureDir(target); err != nil {
			return fmt.Errorf("mount %s: %w", target, err)
		}
	}
	if err := unix.Mount(src, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", fstype, src, target, err)
	}
	b.mounts = append(b.mounts, target)
	return nil
}

// mountBase mounts what the agent itself needs in the initramfs.
func mountBase() error {
	for _, m := range []struct {
		fstype, target string
		flags          uintptr
		data           string
	}{
		{"devtmpfs", "/dev", unix.MS_NOSUID, "mode=0755"},
		{"proc", "/proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	} {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, m.target, m.fstype, m.flags, m.data); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// ensureDir makes path a real directory: the image may have put a symlink or
// a file where the agent mounts, and a mount must not follow a symlink out of
// the box.
func ensureDir(path string) error {
	fi, err := os.Lstat(path)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return os.MkdirAll(path, 0o755)
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimRight(strings.TrimSpace(string(b)), "\x00")
}

// countVirtio counts the virtio devices of one type the kernel knows about.
func countVirtio(id string) int {
	n := 0
	devs, _ := filepath.Glob("/sys/bus/virtio/devices/*/device")
	for _, d := range devs {
		if readTrim(d) == id {
			n++
		}
	}
	return n
}

// devNode returns /dev/NAME for the device whose sysfs dir is sys, creating the
// node from sys/dev when devtmpfs has not made it yet.
func devNode(name, sys string, mode uint32) (string, error) {
	node := "/dev/" + name
	if _, err := os.Stat(node); err == nil {
		return node, nil
	}
	majMin := readTrim(filepath.Join(sys, "dev"))
	maj, min, ok := strings.Cut(majMin, ":")
	if !ok {
		return "", fmt.Errorf("%s: no device number in %s/dev", name, sys)
	}
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("%s: bad device number %q", name, majMin)
	}
	if err := unix.Mknod(node, mode|0o600, int(unix.Mkdev(uint32(a), uint32(b)))); err != nil && err != unix.EEXIST {
		return "", fmt.Errorf("mknod %s: %w", node, err)
	}
	return node, nil
}

// findDisks maps virtio-blk serial numbers to device nodes, waiting until
// every virtio block device has its disk.
func findDisks(timeout time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		want := countVirtio(virtioBlock)
		names, _ := filepath.Glob("/sys/block/vd*")
		if len(names) >= want || time.Now().After(deadline) {
			disks := make(map[string]string)
			for _, sys := range names {
				name := filepath.Base(sys)
				serial := readTrim(filepath.Join(sys, "serial"))
				if serial == "" {
					return nil, fmt.Errorf("disk %s has no serial; the host names every disk", name)
				}
				if other, dup := disks[serial]; dup {
					return nil, fmt.Errorf("disks %s and %s both have serial %q", other, name, serial)
				}
				node, err := devNode(name, sys, unix.S_IFBLK)
				if err != nil {
					return nil, err
				}
				disks[serial] = node
			}
			if len(names) < want {
				return disks, fmt.Errorf("%d virtio block devices but only %d disks after %v", want, len(names), timeout)
			}
			return disks, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// openPort opens the virtio-serial port called name, once, read-write.
func openPort(name string, timeout time.Duration) (*os.File, error) {
	deadline := time.Now().Add(timeout)
	for {
		paths, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		var seen []string
		for _, p := range paths {
			n := readTrim(p)
			seen = append(seen, n)
			if n != name {
				continue
			}
			sys := filepath.Dir(p)
			node, err := devNode(filepath.Base(sys), sys, unix.S_IFCHR)
			if err != nil {
				return nil, err
			}
			f, err := os.OpenFile(node, os.O_RDWR, 0)
			if err != nil {
				return nil, fmt.Errorf("open virtio port %s (%s): %w", name, node, err)
			}
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("virtio-serial port %q did not appear within %v (virtio consoles: %d, ports: %q)",
				name, timeout, countVirtio(virtioConsole), seen)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Mount flags of the box's file systems. Devices are only where the agent
// puts them (the sandbox's own /dev, a tmpfs): a node an image, an imported
// disk or the agent's own copies brought is an inode and nothing more, so
// every file system of the box root is nodev. The layers and the writable
// disk are nosuid too (the agent runs nothing from them directly); the box
// root keeps set-id programs, as Docker does for images: su, sudo and ping
// in an image that runs as a user need them, and they only raise a box
// process to the box's own root, which the box's root has anyway.
const (
	diskFlags = unix.MS_NOATIME | unix.MS_NODEV | unix.MS_NOSUID
	rootFlags = unix.MS_NODEV
)

// setupBox mounts the layer disks read-only, the writable disk (or a tmpfs)
// and stacks them with overlayfs at BoxRoot. With no layer disks it returns a
// box without a root.
func setupBox(disks map[string]string, logf func(string, ...any)) (*box, error) {
	b := &box{}
	var layers []string
	for i := 0; ; i++ {
		dev, ok := disks[protocol.LayerSerial(i)]
		if !ok {
			break
		}
		layers = append(layers, dev)
	}
	var unknown []string
	for serial := range disks {
		if serial == protocol.WritableSerial || serial == protocol.LaneSerial {
			continue
		}
		if i, ok := protocol.LayerIndex(serial); ok {
			if i >= len(layers) {
				return nil, fmt.Errorf("disk %q without layer%d: layers must be numbered from 0 without gaps", serial, len(layers))
			}
			continue
		}
		unknown = append(unknown, serial)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		logf("ignoring disks with serials %q", unknown)
	}

	rwDev, writable := disks[protocol.WritableSerial]
	if writable {
		if err := b.mount(rwDev, rwDir, "ext4", diskFlags, ""); err != nil {
			return b, fmt.Errorf("writable disk: %w", err)
		}
		b.Writable = true
	} else if err := b.mount("tmpfs", rwDir, "tmpfs", diskFlags, "mode=0755"); err != nil {
		return b, err
	}
	if len(layers) == 0 {
		return b, nil
	}
	lower := make([]string, len(layers))
	for i, dev := range layers {
		dir := filepath.Join(layersDir, strconv.Itoa(i))
		if err := b.mount(dev, dir, "ext4", diskFlags|unix.MS_RDONLY, ""); err != nil {
			return b, fmt.Errorf("layer%d: %w", i, err)
		}
		lower[len(layers)-1-i] = dir // overlayfs lists the top layer first
	}
	b.Layers = len(layers)
	upper, work := filepath.Join(rwDir, "upper"), filepath.Join(rwDir, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return b, fmt.Errorf("writable disk: %w", err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if err := b.mount("overlay", BoxRoot, "overlay", rootFlags, opts); err != nil {
		return b, err
	}
	b.Root = BoxRoot
	// The box's /dev, /proc and /sys are the sandbox's (sandboxinit.go),
	// mounted in its own namespace, not here.
	return b, b.ensureTmp()
}

// ensureTmp gives the box a /tmp when the image has none.
func (b *box) ensureTmp() error {
	tmp := filepath.Join(b.Root, "tmp")
	if _, err := os.Lstat(tmp); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(tmp, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o1777); err != nil {
			return err
		}
	}
	return nil
}

// unmount unmounts everything in reverse order; a mount that stays busy is
// detached, and the writable disk is at least made read-only so that its
// journal is clean.
func (b *box) unmount(logf func(string, ...any)) {
	for i := len(b.mounts) - 1; i >= 0; i-- {
		m := b.mounts[i]
		err := unix.Unmount(m, 0)
		if err == nil {
			continue
		}
		if m == rwDir && b.Writable {
			if err2 := unix.Mount("", m, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err2 != nil {
				logf("unmount %s: %v; remount read-only: %v", m, err, err2)
			}
			continue
		}
		logf("unmount %s: %v; detaching", m, err)
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
	b.mounts = nil
}
