package boxlite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// minFreeMiB is the free space a box's disk needs on the host to start: the
// disk is sparse, so this is a floor, not its size.
const minFreeMiB = 512

// makeDisk creates the box's writable ext4 disk once, sparse, atomically,
// on a file system with at least minFreeMiB free.
func makeDisk(path string, sizeGB int) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &fs); err == nil {
		if free := fs.Bavail * uint64(fs.Bsize) >> 20; free < minFreeMiB {
			return errdefs.Errorf(errdefs.ErrLimit, "disk %s: %d MiB free on the host, a box needs at least %d MiB", path, free, minFreeMiB)
		}
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		for _, p := range []string{"/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext4"} {
			if _, e := os.Stat(p); e == nil {
				mkfs, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return errdefs.Errorf(errdefs.ErrNotFound, "mkfs.ext4 (install e2fsprogs)")
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(sizeGB) << 30)
	f.Close()
	if err == nil {
		var out []byte
		out, err = exec.Command(mkfs, "-q", "-F", "-L", "boxlite-rw", "-E", "lazy_itable_init=1,lazy_journal_init=1", tmp).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("mkfs.ext4: %v: %s", err, out)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
