package hv

import (
	"fmt"
	"os"
	"regexp"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// FS is a virtio-fs device (vhost-user-fs-device): the guest mounts it by
// Tag, and a vhost-user backend (virtiofsd) serves it on the other end of
// Conn. A Config with any FS gives the guest its RAM as a shared memfd,
// which the backend maps to reach the guest's buffers.
type FS struct {
	// Tag names the file system in the guest (mount -t virtiofs TAG):
	// 1 to MaxFSTagLen bytes of [A-Za-z0-9._-], unique within a Config.
	Tag string
	// Conn is a connected Unix stream socket whose peer is the backend.
	// QEMU inherits a duplicate; Start does not close Conn.
	Conn *os.File
}

// MaxFSTagLen is the longest FS.Tag: virtio-fs carries 36 bytes.
const MaxFSTagLen = 36

var fsTagRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,36}$`)

func checkFS(fss []FS) error {
	tags := map[string]int{}
	for i, f := range fss {
		field := fmt.Sprintf("Config.FS[%d]", i)
		if !fsTagRE.MatchString(f.Tag) {
			return fmt.Errorf("hv: %s.Tag %q: want 1 to %d bytes of [A-Za-z0-9._-]: %w", field, f.Tag, MaxFSTagLen, errdefs.ErrInvalidArgument)
		}
		if j, dup := tags[f.Tag]; dup {
			return fmt.Errorf("hv: %s.Tag %q: already used by Config.FS[%d]: %w", field, f.Tag, j, errdefs.ErrInvalidArgument)
		}
		tags[f.Tag] = i
		if f.Conn == nil {
			return fmt.Errorf("hv: %s.Conn: required: %w", field, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// dupConn gives QEMU its own copy of a backend connection.
func (l *fdList) dupConn(name string, f *os.File) (int, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("hv: start: %s: dup: %v: %w", name, err, errdefs.ErrLimit)
	}
	return l.add(os.NewFile(uintptr(fd), name)), nil
}

// sharedMemoryArgs puts guest RAM in a memfd QEMU shares with vhost-user
// backends (they map it from the descriptor QEMU sends them). Without a
// backend, guest RAM stays private anonymous memory.
func sharedMemoryArgs(memoryMiB int) []string {
	return []string{"-object", "memory-backend-memfd,id=mem,share=on,size=" + strconv.Itoa(memoryMiB) + "M"}
}

// fsArgs attaches each file system device to its inherited connection.
func fsArgs(fss []FS, fds []int) []string {
	var a []string
	for i, f := range fss {
		id := "fs" + strconv.Itoa(i)
		a = append(a,
			"-chardev", "socket,id="+id+",fd="+strconv.Itoa(fds[i]),
			"-device", "vhost-user-fs-device,chardev="+id+",tag="+f.Tag,
		)
	}
	return a
}
