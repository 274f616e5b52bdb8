package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A read-write directory volume with a size limit (shimapi.Volume's
// SizeLimitBytes) is measured by the shim while the box runs: the blocks
// its files take on the host (as du counts them, each inode once, not
// crossing into other file systems), through the descriptor the box was
// started with, following no symlink. The first measure over the limit
// stops the box, with a reason naming the volume; nothing is deleted.
// Between two measures a box can write past the limit by what it writes in
// that time: the bound is the limit plus the box's write rate times the
// interval (limitMinInterval, or limitSlowdown times the last walk when the
// folder is big). A tree the shim cannot measure (too deep, too big, a
// directory made unreadable) stops the box too.
const (
	limitMinInterval = 2 * time.Second
	limitSlowdown    = 5
	limitMaxDepth    = 1000
	limitMaxEntries  = 2_000_000
)

// volumeLimit is one volume to measure.
type volumeLimit struct {
	guest string
	limit int64
	dir   *os.File // O_PATH descriptor of the volume's directory
}

// newVolumeLimit keeps a descriptor of the volume's directory f for the
// watcher.
func newVolumeLimit(guest string, limit int64, f *os.File) (*volumeLimit, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("volume %s: size limit: %w", guest, err)
	}
	return &volumeLimit{guest: guest, limit: limit, dir: os.NewFile(uintptr(fd), guest)}, nil
}

// watchVolumeLimits measures each of d's limited volumes until the VM
// ends; the watchers own their descriptors from now on.
func (s *shim) watchVolumeLimits(d *fsDaemon) {
	limits := d.limits
	d.limits = nil
	for _, l := range limits {
		go func(l *volumeLimit) {
			defer l.dir.Close()
			for {
				start := time.Now()
				n, err := l.measure()
				took := time.Since(start)
				switch {
				case err != nil:
					s.kill(fmt.Sprintf("volume %s cannot be measured against its size limit: %v", l.guest, err))
					return
				case n > l.limit:
					s.kill(fmt.Sprintf("volume %s holds %d bytes, over its size limit of %d bytes", l.guest, n, l.limit))
					return
				}
				wait := max(limitMinInterval, limitSlowdown*took)
				select {
				case <-s.vm.Done():
					return
				case <-time.After(wait):
				}
			}
		}(l)
	}
}

// measure returns the bytes the files under the volume take.
func (l *volumeLimit) measure() (int64, error) {
	var root unix.Stat_t
	if err := unix.Fstat(int(l.dir.Fd()), &root); err != nil {
		return 0, err
	}
	fd, err := unix.Openat(int(l.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	w := walker{dev: root.Dev, seen: map[uint64]bool{}}
	total := root.Blocks * 512
	n, err := w.dir(fd, 0)
	return total + n, err
}

type walker struct {
	dev     uint64
	entries int
	seen    map[uint64]bool // inodes with more than one link, counted once
}

// dir sums the blocks under the open directory fd, which it closes.
func (w *walker) dir(fd, depth int) (int64, error) {
	f := os.NewFile(uintptr(fd), "volume-dir")
	defer f.Close()
	if depth > limitMaxDepth {
		return 0, fmt.Errorf("directories nested deeper than %d", limitMaxDepth)
	}
	var total int64
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if w.entries++; w.entries > limitMaxEntries {
				return 0, fmt.Errorf("more than %d entries", limitMaxEntries)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
				continue // gone since the listing
			} else if err != nil {
				return 0, fmt.Errorf("stat %q: %w", name, err)
			}
			if st.Dev != w.dev {
				continue // another file system mounted there (by the host)
			}
			if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				if w.seen[st.Ino] {
					continue
				}
				w.seen[st.Ino] = true
			}
			total += st.Blocks * 512
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
					continue // removed or replaced since the stat
				} else if err != nil {
					// E.g. a directory the box made unreadable to hide
					// what it holds.
					return 0, fmt.Errorf("open directory %q: %w", name, err)
				}
				n, err := w.dir(sub, depth+1)
				if err != nil {
					return 0, err
				}
				total += n
			}
		}
		switch {
		case err == io.EOF || err == nil && len(names) == 0, errors.Is(err, unix.ENOENT): // ENOENT: removed while read
			return total, nil
		case err != nil:
			return 0, fmt.Errorf("read directory: %w", err)
		}
	}
}
