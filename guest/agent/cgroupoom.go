//go:build linux

package agent

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// startRootOOM serves TRootOOM: a copy stream (the copies' registry,
// window and cancel) whose data are RootOOM records, one each time the
// root's cgroup's memory.events shows more OOM kills. The kernel tells a
// change of memory.events through inotify (IN_MODIFY); the agent reads the
// file only then. The first record is the count when the watch began
// (protocol.RootOOMRecord).
func (s *server) startRootOOM(f protocol.Frame) {
	id, root, ok := s.rootRequest(f, "root-oom")
	if !ok {
		return
	}
	boxPath, err := s.cfg.Sandbox.rootBoxPath(root)
	dir := ""
	if err == nil {
		if dir = cgroups.of(boxPath); dir == "" {
			err = errdefs.Errorf(errdefs.ErrNotFound, "root-oom: root %s has no cgroup (TRootCgroup makes it)", root)
		}
	}
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.startEventStream(f.Type, id, func(c *copyOp, _ *os.File) error { return c.watchOOM(dir) })
}

// oomKills reads the oom_kill count of memory.events in dir.
func oomKills(dir string) (uint64, bool) {
	b := readSmall(dir + "/memory.events")
	if b == nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// watchOOM sends the OOM kill counts of the cgroup at dir until the host
// cancels or the cgroup goes (nil either way).
func (c *copyOp) watchOOM(dir string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return errdefs.Errorf(errdefs.ErrLimit, "root-oom: inotify: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir+"/memory.events", unix.IN_MODIFY|unix.IN_DELETE_SELF); err != nil {
		return errdefs.Errorf(errdefs.ErrNotFound, "root-oom: watch %s/memory.events: %v", dir, err)
	}
	send := func(n uint64) bool {
		_, err := c.Write(binary.BigEndian.AppendUint64(nil, n))
		return err == nil
	}
	last, ok := oomKills(dir)
	if !ok || !send(last) {
		return nil
	}
	buf := make([]byte, 4096)
	for {
		if n, err := c.readInotify(fd, buf); err != nil || n == 0 {
			return nil // cancelled, or the watch went
		}
		now, ok := oomKills(dir)
		if !ok {
			return nil // the cgroup went
		}
		if now > last {
			last = now
			if !send(now) {
				return nil
			}
		}
	}
}
