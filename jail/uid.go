package jail

import (
	"bufio"
	"fmt"
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

// AllocUID picks an id in [lo, hi] that no other box holds, for Spec.UID
// and Spec.GID of a root caller: no user in /etc/passwd, no group in
// /etc/group and no running process uses it. It holds an exclusive flock on
// stateDir/<id>.lock (created, mode 0700 directory) for as long as the box
// lives; release unlinks and unlocks it and may be called more than once. A
// lock left by a crashed process is free again, so ids are reused.
func AllocUID(stateDir string, lo, hi uint32) (uid uint32, release func(), err error) {
	if lo == 0 || lo > hi || hi >= 0xFFFFFFFF {
		return 0, nil, fmt.Errorf("jail: AllocUID: bad range [%d, %d]: %w", lo, hi, errdefs.ErrInvalidArgument)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return 0, nil, fmt.Errorf("jail: AllocUID: %v: %w", err, errdefs.ErrInternal)
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

// lockID takes the lock file of id, or returns nil when another holds it.
func lockID(dir string, id uint32) (*os.File, error) {
	path := filepath.Join(dir, strconv.FormatUint(uint64(id), 10)+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
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
