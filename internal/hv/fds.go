package hv

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// fdList collects the descriptors a QEMU child inherits: ExtraFiles[i] is
// fd 3+i in the child.
type fdList struct {
	files []*os.File // the child's ends
}

func (l *fdList) add(f *os.File) int {
	l.files = append(l.files, f)
	return 3 + len(l.files) - 1
}

// socketpair returns the parent's end as a net.Conn and the child's fd.
func (l *fdList) socketpair(name string) (net.Conn, int, error) {
	return l.pair(name, unix.SOCK_STREAM)
}

// messagePair is a socketpair of messages (SOCK_SEQPACKET), with buffers
// for bursts of network frames.
func (l *fdList) messagePair(name string) (net.Conn, int, error) {
	return l.pair(name, unix.SOCK_SEQPACKET)
}

func (l *fdList) pair(name string, typ int) (net.Conn, int, error) {
	p, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err == nil && typ == unix.SOCK_SEQPACKET {
		for _, fd := range p {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, netSocketBuf)
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, netSocketBuf)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("hv: start: %s socketpair: %v: %w", name, err, errdefs.ErrLimit)
	}
	parent := os.NewFile(uintptr(p[0]), name)
	c, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		unix.Close(p[1])
		return nil, 0, fmt.Errorf("hv: start: %s conn: %v: %w", name, err, errdefs.ErrInternal)
	}
	return c, l.add(os.NewFile(uintptr(p[1]), name)), nil
}

// open opens a disk image for QEMU, read-only or read-write.
func (l *fdList) open(path string, readOnly bool) (int, error) {
	flags := os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, fmt.Errorf("hv: open disk %s: %w", path, statKind(err))
	}
	if !readOnly {
		// One VM per writable disk. QEMU's own image locking is off for
		// it (see args.go): this lock, on the descriptor QEMU inherits,
		// lasts as long as the VMM has the disk open. An OFD lock, as
		// QEMU's would be: a flock is the host's own (the lane, lane.go).
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 1}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			f.Close()
			return 0, fmt.Errorf(`hv: disk %s: Failed to get "write" lock: another VM has it open (%v): %w`, path, err, errdefs.ErrBootFailed)
		}
	}
	return l.add(f), nil
}

func (l *fdList) closeChildEnds() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}
