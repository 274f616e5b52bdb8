//go:build linux

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Default terminal size and type of a TTY exec.
const (
	defaultRows = 24
	defaultCols = 80
	defaultTerm = "xterm"
)

// pty is a pseudo-terminal pair. The master is non-blocking and
// close-on-exec; the slave is close-on-exec too (ForkExec dups it onto the
// child's fds 0-2) and is not the agent's controlling terminal.
type pty struct {
	master *os.File // read by the output pump
	input  *os.File // a dup of the master: stdin is written to it, resizes go through it
	slave  *os.File
	name   string // the slave's path as the process sees it: /dev/pts/N
}

// openPTY allocates a terminal in the devpts instance at dir, sized rows x
// cols. The slave is opened from the master with TIOCGPTPEER, so it is
// always the master's peer in the same instance, whatever the agent's /dev
// holds; kernels before 4.13 fall back to opening dir/N.
func openPTY(dir string, rows, cols int) (*pty, error) {
	mfd, err := unix.Open(filepath.Join(dir, "ptmx"), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	viaDir := err == nil
	if err != nil && dir == "/dev/pts" {
		// A devpts mounted without ptmxmode has a ptmx nobody may open;
		// /dev/ptmx then finds the instance at /dev/pts.
		mfd, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, ptyErr("open ptmx", err)
	}
	fail := func(what string, err error) (*pty, error) {
		unix.Close(mfd)
		return nil, ptyErr(what, err)
	}
	// dir is the box's: whatever its processes did there, this is a devpts
	// multiplexer or nothing.
	var st unix.Statfs_t
	if err := unix.Fstatfs(mfd, &st); err != nil {
		return fail("fstatfs", err)
	}
	if viaDir && st.Type != unix.DEVPTS_SUPER_MAGIC {
		return fail("open ptmx", fmt.Errorf("%s/ptmx is not on a devpts", dir))
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		return fail("unlock", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return fail("TIOCGPTN", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno == unix.EINVAL || errno == unix.ENOTTY {
		fd, err := unix.Open(filepath.Join(dir, strconv.FormatUint(uint64(n), 10)), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail("open "+name, err)
		}
		sfd, errno = uintptr(fd), 0
	}
	if errno != 0 {
		return fail("TIOCGPTPEER", errno)
	}
	// Reading and writing get an fd each, so that the stdin writer and the
	// output pump each close their own without pulling the other's away.
	wfd, err := unix.FcntlInt(uintptr(mfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(int(sfd))
		return fail("dup", err)
	}
	p := &pty{master: os.NewFile(uintptr(mfd), "ptmx"), input: os.NewFile(uintptr(wfd), "ptmx"),
		slave: os.NewFile(sfd, name), name: name}
	// The kernel's defaults (ICANON, ECHO, ISIG, ICRNL, ONLCR, ...) are what
	// programs expect of a fresh terminal; only IUTF8 is added, so that
	// erasing a multi-byte character erases all of it.
	if t, err := unix.IoctlGetTermios(int(sfd), unix.TCGETS); err == nil {
		t.Iflag |= unix.IUTF8
		_ = unix.IoctlSetTermios(int(sfd), unix.TCSETS, t)
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		p.close()
		return nil, ptyErr("set size", err)
	}
	return p, nil
}

func (p *pty) close() {
	p.master.Close()
	p.input.Close()
	p.slave.Close()
}

func ptyErr(what string, err error) error {
	kind := errdefs.ErrInternal
	if err == unix.ENOSPC || err == unix.EMFILE || err == unix.ENFILE || err == unix.EAGAIN {
		kind = errdefs.ErrLimit // devpts max, or out of fds
	}
	return errdefs.Errorf(kind, "exec: pseudo-terminal: %s: %v", what, err)
}

// termSize applies the defaults to a requested size and checks it.
func termSize(rows, cols int) (int, int, error) {
	if rows == 0 {
		rows = defaultRows
	}
	if cols == 0 {
		cols = defaultCols
	}
	if rows < 1 || cols < 1 || rows > protocol.MaxTermSize || cols > protocol.MaxTermSize {
		return 0, 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "terminal size %dx%d: rows and cols must be 1-%d", rows, cols, protocol.MaxTermSize)
	}
	return rows, cols, nil
}

// resize sets the size of a TTY exec's terminal; the kernel sends SIGWINCH
// to its foreground process group. A non-TTY exec ignores it.
func (e *execution) resize(rows, cols int) error {
	if e.tty == nil {
		return nil
	}
	if rows < 1 || cols < 1 || rows > protocol.MaxTermSize || cols > protocol.MaxTermSize {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "resize to %dx%d: rows and cols must be 1-%d", rows, cols, protocol.MaxTermSize)
	}
	return e.ttyControl(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
	})
}

// ttyControl runs f on the master's fd unless it has been closed.
func (e *execution) ttyControl(f func(fd int) error) error {
	rc, err := e.tty.SyscallConn()
	if err != nil {
		return nil
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return nil // closed: the exec is over
	}
	return ferr
}

// eofChar is the terminal's EOF character (VEOF), ^D unless a program
// changed it.
func (e *execution) eofChar() byte {
	c := byte(4)
	_ = e.ttyControl(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS) // on a master: the slave's settings
		if err == nil && t.Cc[unix.VEOF] != 0 {
			c = t.Cc[unix.VEOF]
		}
		return err
	})
	return c
}

// sessionGroups lists the process groups with a process in session sid. A
// session id stays taken while any process has it, so none of these groups
// belongs to anyone else.
func sessionGroups(sid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var groups []int
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		f, err := procStat(pid) // state ppid pgrp session ...
		if err != nil {
			continue // gone
		}
		pg, err1 := strconv.Atoi(f[2])
		s, err2 := strconv.Atoi(f[3])
		if err1 == nil && err2 == nil && s == sid && pg > 0 && !slices.Contains(groups, pg) {
			groups = append(groups, pg)
		}
	}
	return groups
}
