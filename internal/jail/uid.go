package jail

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Suggested AllocUID range: 65536 ids below 2^31, clear of the ranges
// systemd documents for system, regular, dynamic and container users and
// of the ids at and above 2^31 that some programs mishandle.
const (
	UIDRangeLo uint32 = 0x7E000000
	UIDRangeHi uint32 = 0x7E00FFFF
)

// HostUIDDir is the host-wide AllocUID state of boxlite's shims: one
// directory for every home on the host, so that two boxes never share a
// uid, whichever homes they belong to. Only root callers allocate uids; it
// is made root's, mode 0700, under /run (a tmpfs: the locks die with the
// boot, as the processes holding them do).
const HostUIDDir = "/run/boxlite/uids"

// AllocUID picks an id in [lo, hi] that no other box holds, for Spec.UID
// and Spec.GID of a root caller: no user in /etc/passwd, no group in
// /etc/group and no running process uses it. It holds an exclusive flock on
// stateDir/<id>.lock for as long as the box lives; release unlinks and
// unlocks it and may be called more than once. A lock left by a crashed
// process is free again, so ids are reused. Every caller that must not
// share ids with another passes the same stateDir (HostUIDDir): it is
// created (mode 0700, parents 0755) and must be a directory of the caller's
// that nobody else may write, or AllocUID refuses it.
func AllocUID(stateDir string, lo, hi uint32) (uid uint32, release func(), err error) {
	if lo == 0 || lo > hi || hi >= 0xFFFFFFFF {
		return 0, nil, fmt.Errorf("jail: AllocUID: bad range [%d, %d]: %w", lo, hi, errdefs.ErrInvalidArgument)
	}
	if err := os.MkdirAll(filepath.Dir(stateDir), 0o755); err != nil {
		return 0, nil, fmt.Errorf("jail: AllocUID: %v: %w", err, errdefs.ErrInternal)
	}
	if err := os.Mkdir(stateDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return 0, nil, fmt.Errorf("jail: AllocUID: %v: %w", err, errdefs.ErrInternal)
	}
	if err := privateDir(stateDir); err != nil {
		return 0, nil, err
	}
	if err := safeParent(filepath.Dir(stateDir)); err != nil {
		return 0, nil, err
	}
	used := map[uint32]bool{}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		idsInFile(f, used)
	}
	procIDs(used)
	for id := lo; ; id++ {
		if !used[id] {
			f, err := lockID(stateDir, id)
			if err != nil {
				return 0, nil, err
			}
			if f != nil {
				path := f.Name()
				done := false
				return id, func() {
					if !done {
						done = true
						os.Remove(path)
						f.Close()
					}
				}, nil
			}
		}
		if id == hi {
			return 0, nil, fmt.Errorf("jail: AllocUID: every id in [%d, %d] is in use: %w", lo, hi, errdefs.ErrLimit)
		}
	}
}

// privateDir checks that dir is a directory (not a symlink) of the caller's
// that no other user can write: whoever could would be able to delete
// another box's lock and take its uid.
func privateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("jail: AllocUID: %s: %v: %w", dir, err, errdefs.ErrInternal)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("jail: AllocUID: %s is not a directory: %w", dir, errdefs.ErrInvalidArgument)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("jail: AllocUID: %s belongs to uid %d, not to the caller: %w", dir, st.Uid, errdefs.ErrInvalidArgument)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("jail: AllocUID: %s is writable by group or others (mode %#o): %w", dir, st.Mode&0o7777, errdefs.ErrInvalidArgument)
	}
	return nil
}

// safeParent checks that nobody but the caller and root can replace the
// state directory: its parent is theirs, and sticky if others may write it
// (as /tmp is).
func safeParent(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("jail: AllocUID: %s: %v: %w", dir, err, errdefs.ErrInternal)
	}
	if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
		return fmt.Errorf("jail: AllocUID: %s (uid %d, mode %#o) lets others replace the state directory: %w",
			dir, st.Uid, st.Mode&0o7777, errdefs.ErrInvalidArgument)
	}
	return nil
}

// lockID takes the lock file of id, or returns nil when another holds it.
func lockID(dir string, id uint32) (*os.File, error) {
	path := filepath.Join(dir, strconv.FormatUint(uint64(id), 10)+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("jail: AllocUID: %v: %w", err, errdefs.ErrInternal)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if err == unix.EWOULDBLOCK {
				return nil, nil
			}
			return nil, fmt.Errorf("jail: AllocUID: flock %s: %v: %w", path, err, errdefs.ErrInternal)
		}
		// The holder may have released (unlinked) the file between our
		// open and flock: then this lock is on a dead inode; try again.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			f.Truncate(0)
			f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
			return f, nil
		}
		f.Close()
	}
}

// idsInFile adds the third field (the uid or gid) of each line of a
// passwd-style file.
func idsInFile(path string, used map[uint32]bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) < 3 {
			continue
		}
		if n, err := strconv.ParseUint(p[2], 10, 32); err == nil {
			used[uint32(n)] = true
		}
	}
}

// procIDs adds every uid and gid a running process has.
func procIDs(used map[uint32]bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "Uid:") && !strings.HasPrefix(line, "Gid:") {
				continue
			}
			for _, w := range strings.Fields(line)[1:] {
				if n, err := strconv.ParseUint(w, 10, 32); err == nil {
					used[uint32(n)] = true
				}
			}
		}
	}
}
