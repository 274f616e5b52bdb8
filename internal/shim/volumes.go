package shim

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/jail"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// A box's volumes are served by at most two virtiofsd daemons, one for the
// read-write volumes and one for the read-only ones, each behind one
// virtio-fs device, however many volumes there are: microvm has 24
// virtio-mmio slots in all (the 25th device fails: "No 'virtio-bus' bus
// found"), which the image's layer disks, the box disk, the agent port and
// network devices share. Each daemon runs in a jail whose root holds only
// its shares, bound at sharesDir/<volume index> (read-only binds for the
// read-only daemon, which also runs --readonly): the guest mounts the device
// once and binds each share to its guest path.
const (
	sharesDir = "/shares"
	// fsMemoryMax and fsPidsMax are each daemon's cgroup limits: its own
	// memory and the page cache of the files it reads; its threads.
	fsMemoryMax = 512 << 20
	fsPidsMax   = 128
)

// fsDaemon is one running virtiofsd.
type fsDaemon struct {
	name string // "rw" or "ro"
	cmd  *jail.Cmd
	conn *os.File // QEMU's end of the vhost-user socket, until QEMU has it
	done chan struct{}
	err  error // set before done is closed
	// limits are the size-limited volumes it serves, until watched.
	limits []*volumeLimit
}

// startVolumes starts the file daemons of the box's volumes and returns
// their devices and the kernel command line words that tell the agent
// where to mount each volume: boxlite.vol=INDEX:rw|ro:d|f:GUESTPATH, the
// path escaped as a URL path (no spaces or quotes).
func (s *shim) startVolumes() ([]hv.FS, string, error) {
	vols := s.cfg.Volumes
	if len(vols) == 0 {
		return nil, "", nil
	}
	if s.cfg.Virtiofsd == "" {
		return nil, "", errdefs.Errorf(errdefs.ErrNotFound, "box %s: volumes need virtiofsd, which is not among the boxlite assets", s.cfg.BoxID)
	}
	var words []string
	binds := map[bool][]jail.Bind{}
	var limits []*volumeLimit
	defer func() {
		for _, l := range limits {
			l.dir.Close() // not handed to the rw daemon
		}
	}()
	// The daemons bind these descriptors, never the paths (jail.Bind.File):
	// each is the file the box was created with, reached without a symlink.
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, v := range vols {
		f, id, err := shimapi.OpenVolume(v)
		if err != nil {
			return nil, "", fmt.Errorf("box %s: %w", s.cfg.BoxID, err)
		}
		files = append(files, f)
		if v.HostID == nil {
			s.fsWarnings = append(s.fsWarnings, fmt.Sprintf("volume %s: created by an older boxlite that did not record its host file; "+
				"checked for symlinks only (recreate the box to pin it)", v.GuestPath))
		}
		if v.SizeLimitBytes > 0 && !v.ReadOnly && id.Type == "dir" {
			l, err := newVolumeLimit(v.GuestPath, v.SizeLimitBytes, f)
			if err != nil {
				return nil, "", fmt.Errorf("box %s: %w", s.cfg.BoxID, err)
			}
			limits = append(limits, l)
		}
		words = append(words, protocol.VolumeWord{Index: i, ReadOnly: v.ReadOnly, File: id.Type != "dir", GuestPath: v.GuestPath}.String())
		binds[v.ReadOnly] = append(binds[v.ReadOnly], jail.Bind{Host: v.HostPath, File: f,
			Inside: sharesDir + "/" + strconv.Itoa(i), Writable: !v.ReadOnly})
	}
	var fss []hv.FS
	for _, ro := range []bool{false, true} {
		if len(binds[ro]) == 0 {
			continue
		}
		d, err := s.startFSDaemon(ro, binds[ro])
		if err != nil {
			return nil, "", err
		}
		s.fsDaemons = append(s.fsDaemons, d)
		if !ro {
			d.limits, limits = limits, nil
		}
		tag := protocol.FSTagRW
		if ro {
			tag = protocol.FSTagRO
		}
		fss = append(fss, hv.FS{Tag: tag, Conn: d.conn})
	}
	return fss, strings.Join(words, " "), nil
}

// startFSDaemon starts one virtiofsd over binds, confined like the VMM: its
// own mount, IPC and network namespaces whose root holds only the shares,
// its own cgroup, rlimits, no_new_privs and the jail's seccomp filter under
// virtiofsd's own. virtiofsd's sandbox is off (--sandbox=none): the jail
// already gives it a root of only its shares, and the jail's filter refuses
// the unshare, mount and pivot_root its sandbox would make.
//
// Identity: for a non-root caller the daemon runs as the caller (in a user
// namespace mapping only the caller), so files a box creates are the
// caller's. A root caller's daemon keeps root, to act on the files as root
// (Spec.KeepRoot; the box info says so), without the capabilities to make
// device nodes, set file capabilities, switch uid or keep set-id bits on
// a write (CAP_FSETID). Either way every guest uid and gid is squashed to
// the daemon's own: the box cannot create files owned by anyone else.
//
// Privileges: whoever the caller is, the jail's filter for file daemons
// (Spec.DenySetID) refuses every set-user-ID or set-group-ID mode (chmod,
// or creating with one), device nodes and extended attributes (file
// capabilities) with EPERM, so a box leaves no privilege in a host folder;
// virtiofsd also runs without --xattr.
func (s *shim) startFSDaemon(ro bool, binds []jail.Bind) (d *fsDaemon, err error) {
	name := "rw"
	if ro {
		name = "ro"
	}
	d = &fsDaemon{name: name, done: make(chan struct{})}
	listener, conn, err := s.fsSocket(name)
	if err != nil {
		return nil, err
	}
	defer listener.Close() // the daemon has its own copy once started
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	d.conn = conn

	bin := s.cfg.Virtiofsd
	uid, gid := os.Getuid(), os.Getgid()
	args := []string{bin, "--fd=3", "--shared-dir=" + sharesDir, "--sandbox=none", "--seccomp=kill",
		"--inode-file-handles=never", "--announce-submounts", "--cache=auto", "--rlimit-nofile=0", "--log-level=warn",
		fmt.Sprintf("--translate-uid=squash-guest:0:%d:4294967295", uid),
		fmt.Sprintf("--translate-gid=squash-guest:0:%d:4294967295", gid)}
	if ro {
		args = append(args, "--readonly")
	}
	root := os.Geteuid() == 0
	if root {
		args = append(args, "--modcaps=-mknod:-setfcap:-setuid:-setgid:-fsetid")
	}
	// virtiofsd reopens files through /proc/self/fd and reads
	// /proc/sys/fs/nr_open at start: the jail shows it those (read-only),
	// its own process's fd directory, and nothing else of /proc.
	binds = append(binds, jail.Bind{Host: "/proc/self/fd", Inside: "/proc/self/fd"},
		jail.Bind{Host: "/proc/sys/fs/nr_open", Inside: "/proc/sys/fs/nr_open"})
	path := bin
	if !strings.HasPrefix(bin, "/usr/") {
		// At the root, not at its host path: the daemon's root shows
		// nothing of where boxlite is installed.
		path = "/virtiofsd"
		binds = append(binds, jail.Bind{Host: bin, Inside: path})
	}
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	// virtiofsd holds a descriptor per file the guest has looked up: give
	// it the shim's hard limit.
	nofile := lim.Max
	spec := jail.Spec{
		Path: path, Args: args, KeepRoot: true, DenySetID: true, Binds: binds, Devices: []string{"/dev/null"},
		ExtraFiles: []*os.File{listener}, Stdout: os.Stderr, Stderr: os.Stderr,
		Cgroup: &jail.CgroupSpec{Name: "boxlite-" + s.cfg.BoxID + ".fs-" + name,
			MemoryMaxBytes: fsMemoryMax, PidsMax: fsPidsMax, CPUWeight: 100},
		Rlimits: []jail.Rlimit{{Resource: unix.RLIMIT_CORE}, {Resource: unix.RLIMIT_NOFILE, Cur: nofile, Max: nofile}},
	}
	if d.cmd, err = hv.StartHelper("", spec); err != nil {
		return nil, fmt.Errorf("box %s: start virtiofsd for the %s volumes: %w", s.cfg.BoxID, name, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	l := d.cmd.Layers()
	if !l.PivotRoot.Applied {
		// Without its own root the daemon would serve the host's /shares.
		d.stop()
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "box %s: volumes need a mount namespace for virtiofsd, which this host refuses (%s)",
			s.cfg.BoxID, l.PivotRoot.Note)
	}
	for _, m := range l.Missing() {
		s.fsWarnings = append(s.fsWarnings, fmt.Sprintf("volume daemon (%s) confinement: no %s (%s)", name, m.Name, m.Note))
	}
	return d, nil
}

// fsSocket makes the vhost-user socket pair: a listening socket for
// virtiofsd (which wants one to accept from) and QEMU's end, connected to
// it at once. The listener's path, in the box directory (0700), exists only
// between bind and connect: nobody else can reach it, and virtiofsd then
// accepts the one connection already queued.
func (s *shim) fsSocket(name string) (listener, conn *os.File, err error) {
	path := s.cfg.Path("fs-" + name + ".sock")
	if len(path) >= 108 {
		return nil, nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "socket path %q is longer than 107 bytes (use a shorter BOXLITE_HOME)", path)
	}
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("virtiofsd socket: %v: %w", err, errdefs.ErrLimit)
	}
	listener = os.NewFile(uintptr(lfd), "virtiofsd-listener")
	os.Remove(path)
	addr := &unix.SockaddrUnix{Name: path}
	if err := unix.Bind(lfd, addr); err != nil {
		listener.Close()
		return nil, nil, fmt.Errorf("virtiofsd socket %s: bind: %v: %w", path, err, errdefs.ErrInternal)
	}
	defer os.Remove(path)
	if err := unix.Listen(lfd, 1); err != nil {
		listener.Close()
		return nil, nil, fmt.Errorf("virtiofsd socket: listen: %v: %w", err, errdefs.ErrInternal)
	}
	cfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		listener.Close()
		return nil, nil, fmt.Errorf("virtiofsd socket: %v: %w", err, errdefs.ErrLimit)
	}
	if err := unix.Connect(cfd, addr); err != nil {
		unix.Close(cfd)
		listener.Close()
		return nil, nil, fmt.Errorf("virtiofsd socket: connect: %v: %w", err, errdefs.ErrInternal)
	}
	return listener, os.NewFile(uintptr(cfd), "virtiofsd-"+name), nil
}

// stop kills the daemon and waits until it is reaped (and its cgroup gone).
func (d *fsDaemon) stop() {
	select {
	case <-d.done:
	default:
		d.cmd.Process().Kill()
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			log.Printf("virtiofsd (%s volumes) not reaped 10 s after SIGKILL", d.name)
		}
	}
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	for _, l := range d.limits {
		l.dir.Close()
	}
	d.limits = nil
}

// watchVolumes stops the box when a file daemon dies under it: the guest's
// file operations on its volumes would hang.
func (s *shim) watchVolumes() {
	for _, d := range s.fsDaemons {
		s.watchVolumeLimits(d)
		go func(d *fsDaemon) {
			select {
			case <-d.done:
				// A daemon also ends when QEMU does: blame it only if
				// QEMU is still running a moment later.
				select {
				case <-s.vm.Done():
					return
				case <-time.After(500 * time.Millisecond):
				}
				s.mu.Lock()
				stopping := s.stopping
				s.mu.Unlock()
				if !stopping {
					s.kill(fmt.Sprintf("virtiofsd for the %s volumes exited: %v", d.name, d.err))
				}
			case <-s.vm.Done():
			}
		}(d)
	}
}

// stopVolumes ends every file daemon; idempotent.
func (s *shim) stopVolumes() {
	for _, d := range s.fsDaemons {
		d.stop()
	}
}

// closeFSConns drops the shim's copies of QEMU's ends once QEMU has its own.
func (s *shim) closeFSConns() {
	for _, d := range s.fsDaemons {
		if d.conn != nil {
			d.conn.Close()
			d.conn = nil
		}
	}
}
