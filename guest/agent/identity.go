//go:build linux

package agent

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The random driver's ioctls (linux/random.h), the same on every
// architecture boxlite builds for.
const (
	rndAddEntropy = 0x40085203 // _IOW('R', 0x03, int[2])
	rndReseedCRNG = 0x5207     // _IO('R', 0x07)
)

// applyIdentity makes the box its own machine (see protocol.Identity): a VM
// started from a template runs on another VM's memory, whose kernel RNG
// would hand every copy the same "random" bytes until it reseeds by
// itself, whose clock is the template's and whose hostname is not its own.
func (s *server) applyIdentity(f protocol.Frame) {
	if f.Stream != 0 {
		s.failStream(f.Stream, errdefs.Errorf(errdefs.ErrInvalidArgument, "identity frame on stream %d: it belongs on stream 0", f.Stream))
		return
	}
	var id protocol.Identity
	err := protocol.Decode(f, &id)
	if err == nil {
		err = id.Check()
	}
	if err == nil {
		err = seedRNG(id.Seed)
	}
	if err == nil {
		ts := unix.NsecToTimespec(id.UnixNano)
		if cerr := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); cerr != nil {
			err = errdefs.Errorf(errdefs.ErrInternal, "identity: set the clock: %v", cerr)
		}
	}
	if err == nil {
		err = s.setHostname(id.Hostname)
	}
	if err == nil && id.TrustCA != "" {
		if cerr := installTrustCA(s.cfg.Root, id.TrustCA); cerr != nil {
			err = errdefs.Errorf(errdefs.ErrInternal, "identity: %v", cerr)
		}
	}
	if err == nil && id.Sandbox != nil {
		if s.cfg.Sandbox == nil {
			err = errdefs.Errorf(errdefs.ErrUnsupported, "identity: a sandbox policy for a guest without a box sandbox")
		} else {
			err = s.cfg.Sandbox.SetPolicy(*id.Sandbox)
		}
	}
	if err == nil && id.BootID != "" && s.cfg.Sandbox != nil {
		err = s.cfg.Sandbox.SetMachine(id.BootID, id.MachineID)
	}
	if err != nil {
		s.sendError(0, err)
		return
	}
	reply, _ := protocol.Encode(protocol.TIdentity, 0, nil)
	_ = s.write(reply)
}

// applyClock steps the guest's wall clock to the host's (protocol.Clock):
// a VM resumed from a pause kept the time it was paused at.
func (s *server) applyClock(f protocol.Frame) {
	if f.Stream != 0 {
		s.failStream(f.Stream, errdefs.Errorf(errdefs.ErrInvalidArgument, "clock frame on stream %d: it belongs on stream 0", f.Stream))
		return
	}
	var c protocol.Clock
	err := protocol.Decode(f, &c)
	if err == nil && c.UnixNano <= 0 {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "clock: %d ns is no time after 1970", c.UnixNano)
	}
	if err == nil {
		ts := unix.NsecToTimespec(c.UnixNano)
		if cerr := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); cerr != nil {
			err = errdefs.Errorf(errdefs.ErrInternal, "clock: %v", cerr)
		}
	}
	if err != nil {
		s.sendError(0, err)
		return
	}
	reply, _ := protocol.Encode(protocol.TClock, 0, nil)
	_ = s.write(reply)
}

// seedRNG mixes seed into the kernel's entropy pool, credited in full, and
// makes the kernel rekey its CRNG from the pool at once (not at its next
// scheduled reseed), so nothing read after this repeats another copy's.
func seedRNG(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "identity: %v", err)
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	*(*int32)(unsafe.Pointer(&info[0])) = int32(8 * len(seed))
	*(*int32)(unsafe.Pointer(&info[4])) = int32(len(seed))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return errdefs.Errorf(errdefs.ErrInternal, "identity: add entropy: %v", e)
	}
	runtime.KeepAlive(info)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0); e != 0 {
		return errdefs.Errorf(errdefs.ErrInternal, "identity: reseed the CRNG: %v", e)
	}
	return nil
}

// setHostname names the agent's UTS namespace and the sandbox's, and every
// sandbox started after (see Sandbox.SetHostname).
func (s *server) setHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "identity: hostname: %v", err)
	}
	if s.cfg.Sandbox != nil {
		if err := s.cfg.Sandbox.SetHostname(name); err != nil {
			return errdefs.Errorf(errdefs.ErrInternal, "identity: the sandbox's hostname: %v", err)
		}
	}
	return nil
}

// setHostnameOf sets the hostname of pid's UTS namespace from a thread of
// its own, which joins that namespace and then ends (it is never unlocked,
// so the Go runtime ends it with the goroutine).
func setHostnameOf(pid int, name string) error {
	errc := make(chan error, 1)
	go func() {
		lockOffMainThread()
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/uts", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWUTS); err != nil {
			errc <- err
			return
		}
		errc <- unix.Sethostname([]byte(name))
	}()
	return <-errc
}

// bootIDPath is where the box's processes read their boot id.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// setMachineOf gives the sandbox of init pid a boot id (a file bound over
// its procfs's boot_id: the kernel's own is made once per boot, and a fork
// of a running box shares its source's) and, where its root has one, a new
// /etc/machine-id. It works in the sandbox's mount namespace, on a thread
// of its own that dies after.
func setMachineOf(pid int, bootID, machineID string) error {
	return inMountNSOf(pid, func() error {
		// The file lives on the sandbox's /dev (a tmpfs of its own)
		// only until it is bound: the mount keeps it.
		tmp := "/dev/.boxlite-boot_id"
		if err := os.WriteFile(tmp, []byte(bootID+"\n"), 0o444); err != nil {
			return err
		}
		defer os.Remove(tmp)
		// A box given an identity before (a fork of a fork, a restored
		// memory snapshot of a restored box) has its file bound there
		// already, unlinked: a mount over it fails (ENOENT). Drop it.
		for range 4 {
			if unix.Unmount(bootIDPath, unix.MNT_DETACH) != nil {
				break // EINVAL: nothing bound there
			}
		}
		if err := unix.Mount(tmp, bootIDPath, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind the boot id: %w", err)
		}
		if err := unix.Mount("", bootIDPath, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("the boot id read-only: %w", err)
		}
		if machineID == "" {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat("/etc/machine-id", &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil // none, or not a plain file: left alone
		}
		f, err := os.OpenFile("/etc/machine-id", os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("machine id: %w", err)
		}
		_, err = f.WriteString(machineID + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// inMountNSOf runs fn in the mount namespace of pid (the sandbox's), on a
// thread of its own that dies after (it is never unlocked).
func inMountNSOf(pid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		lockOffMainThread() // the thread is not unlocked: it ends with the goroutine
		errc <- func() error {
			fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare fs: %w", err)
			}
			if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("join the mount namespace: %w", err)
			}
			return fn()
		}()
	}()
	return <-errc
}
