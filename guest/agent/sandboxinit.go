//go:build linux

package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/seccomp"
)

// sandboxInitArg0 is argv[0] of the sandbox init: the agent binary run again
// by the agent, as PID 1 of the box's PID namespace (so Main sees pid 1 too).
const sandboxInitArg0 = "boxlite-sandbox-init"

// sandboxInitFd is where the sandbox init reports: "ok", or why it failed.
const sandboxInitFd = 3

// boxHostname is the box's hostname (in its own UTS namespace).
const boxHostname = "boxlite"

// isSandboxInit tells Main that this process is the sandbox init.
func isSandboxInit() bool {
	return len(os.Args) == 1 && os.Args[0] == sandboxInitArg0 && os.Getpid() == 1 && os.Getppid() == 0
}

// sandboxInitMain is the sandbox init: started by the agent in new PID,
// mount, IPC and UTS namespaces, it turns its mount namespace into the box's
// container root, reports, and then only reaps the box's orphans. It never
// returns.
func sandboxInitMain() {
	// no_new_privs is a thread's: the setup below (its prctl, then the
	// seccomp filter synced to every thread) must run on one thread, the
	// main one that /proc/1/status shows, or a goroutine moved between
	// them leaves that thread without the flag.
	runtime.LockOSThread()
	// Signals from box processes must not end it: PID 1 of a namespace only
	// gets the signals it handles, and the Go runtime would exit on most.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	report := os.NewFile(sandboxInitFd, "report")
	err := sandboxInitSetup(BoxRoot)
	if err != nil {
		fmt.Fprintf(report, "%v", err)
		os.Exit(1)
	}
	fmt.Fprint(report, "ok")
	report.Close()
	for {
		for {
			pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
		}
		<-sigs
	}
}

// sandboxInitSetup builds the container root at root and moves into it,
// then locks the sandbox init down: the box's seccomp filter, no
// capabilities, not dumpable.
func sandboxInitSetup(root string) error {
	unix.Umask(0o022)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	old, err := mountPoints("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	if err := mountContainerFS(root); err != nil {
		return err
	}
	// The agent's mounts (its /dev with the virtio port and the disks, its
	// /proc, the layer and rw disks under /run/box) leave this namespace;
	// overlayfs keeps its own references to its layers.
	sort.Slice(old, func(i, j int) bool { return len(old[i]) > len(old[j]) })
	for _, m := range old {
		if m == "/" || m == root || strings.HasPrefix(m, root+"/") {
			continue
		}
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("detach %s: %w", m, err)
		}
	}
	// pivot_root cannot leave the initramfs (rootfs has no parent mount), so
	// the box root is moved onto / and entered, as switch_root does. The
	// initramfs is then covered at its own root, where ".." stays: a chroot
	// escape ends at the box's /, and nothing of the initramfs is reachable.
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(root, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the box root onto /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(boxHostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	// Nothing of the agent's stays open: stdio becomes the box's /dev/null.
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/null: %w", err)
	}
	for fd := 0; fd < 3; fd++ {
		if err := unix.Dup3(null, fd, 0); err != nil {
			return fmt.Errorf("dup /dev/null: %w", err)
		}
	}
	unix.Close(null)

	prog, err := boxSeccomp()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := seccomp.Install(prog, unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
		return err
	}
	// No capabilities left in any thread (one call: each costs a signal
	// to every thread); it never executes anything, so the bounding set
	// does not matter.
	if err := setCaps(syscall.AllThreadsSyscall6, true); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	return nil
}

// mountPoints lists the mount points in a mountinfo file.
func mountPoints(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountinfo(fields[4]))
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space ...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// docker's masked and read-only paths (moby's oci defaults).
var (
	maskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// boxDevices are the device nodes of the box's /dev (docker's set; the
// terminals come from the box's own devpts).
var boxDevices = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

type mountStep struct {
	src, target, fstype string
	flags               uintptr
	data                string
}

// mountContainerFS gives root a container's kernel file systems: a small
// /dev of its own (tmpfs with the harmless devices, its own devpts, shm and
// mqueue), a /proc of the box's PID namespace with docker's masks, and a
// read-only /sys. The agent's devtmpfs (its virtio port, the raw disks) is
// not among them.
func mountContainerFS(root string) error {
	const nosuidNodevNoexec = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	in := func(p string) string { return filepath.Join(root, p) }
	do := func(steps ...mountStep) error {
		for _, s := range steps {
			if err := ensureDir(s.target); err != nil {
				return fmt.Errorf("mount %s: %w", s.target, err)
			}
			if err := unix.Mount(s.src, s.target, s.fstype, s.flags, s.data); err != nil {
				return fmt.Errorf("mount %s (%s) on %s: %w", s.fstype, s.src, s.target, err)
			}
		}
		return nil
	}
	if err := do(mountStep{"tmpfs", in("dev"), "tmpfs", unix.MS_NOSUID | unix.MS_STRICTATIME, "mode=0755,size=65536k"}); err != nil {
		return err
	}
	for _, d := range boxDevices {
		p := in("dev/" + d.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		if err := unix.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	for link, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, in("dev/"+link)); err != nil {
			return err
		}
	}
	if err := do(
		mountStep{"devpts", in("dev/pts"), "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"},
		mountStep{"shm", in("dev/shm"), "tmpfs", nosuidNodevNoexec, "mode=1777"},
		mountStep{"mqueue", in("dev/mqueue"), "mqueue", nosuidNodevNoexec, ""},
		mountStep{"proc", in("proc"), "proc", nosuidNodevNoexec, ""},
		mountStep{"sysfs", in("sys"), "sysfs", nosuidNodevNoexec | unix.MS_RDONLY, ""},
	); err != nil {
		return err
	}
	// The box's cgroups, read-only, when its kernel has them: a
	// container's processes read their limits and usage there.
	if fi, err := os.Lstat(in("sys/fs/cgroup")); err == nil && fi.IsDir() {
		err := unix.Mount("cgroup2", in("sys/fs/cgroup"), "cgroup2", nosuidNodevNoexec|unix.MS_RDONLY, "")
		if err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("mount cgroup2 on %s: %w", in("sys/fs/cgroup"), err)
		}
	}
	for _, p := range maskedPaths {
		fi, err := os.Lstat(in(p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", in(p), "tmpfs", unix.MS_RDONLY|nosuidNodevNoexec, "")
		} else {
			err = unix.Mount(in("dev/null"), in(p), "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	for _, p := range readonlyPaths {
		if _, err := os.Lstat(in(p)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := unix.Mount(in(p), in(p), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
		if err := unix.Mount(in(p), in(p), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|nosuidNodevNoexec, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	return nil
}
