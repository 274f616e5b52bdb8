//go:build linux

package agent

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A process root with a cgroup (TRootCgroup, cgroup.go) is measured from
// it. Without one (or in a box whose kernel has no cgroups), its usage
// is summed over the processes whose root directory is that root, read
// from /proc: CPU time (of the live processes, with what their waited-for
// children used), resident memory. A process whose parent ended and that
// the sandbox init reaped takes its CPU time with it.

// userHZ is the kernel's USER_HZ (clock ticks of /proc/<pid>/stat); 100
// on every architecture Linux runs boxes on.
const userHZ = 100

// maxProcScan bounds the /proc entries one measure reads.
const maxProcScan = 1 << 16

// rootUsage serves TRootUsage.
func (s *server) rootUsage(f protocol.Frame) {
	id, root, ok := s.rootRequest(f, "root-usage")
	if !ok {
		return
	}
	go func() {
		u, err := s.cfg.Sandbox.rootUsage(root)
		if err != nil {
			s.sendError(id, err)
			return
		}
		f, err := protocol.Encode(protocol.TStdout, id, u)
		if err == nil {
			err = s.write(f)
		}
		if err != nil {
			s.sendError(id, err)
			return
		}
		if f, err := protocol.Encode(protocol.TCopyDone, id, protocol.CopyDone{}); err == nil {
			_ = s.write(f)
		}
	}()
}

// rootUsage measures the processes whose root is root (a box path).
func (sb *Sandbox) rootUsage(root string) (protocol.RootUsage, error) {
	var u protocol.RootUsage
	sb.mu.Lock()
	g := sb.gen
	sb.mu.Unlock()
	if g == nil || g.down() {
		return u, errdefs.Errorf(errdefs.ErrInvalidState, "root-usage: the box's sandbox is not running")
	}
	agentPath, err := resolveIn(g.root(), root)
	var want unix.Stat_t
	if err == nil {
		err = unix.Stat(agentPath, &want)
	}
	if err != nil {
		return u, errdefs.Errorf(errdefs.ErrNotFound, "root-usage: root %q: %v", root, err)
	}
	readMeminfo(&u)
	if dir := cgroups.of(g.boxPath(agentPath)); dir != "" {
		readCgroupUsage(dir, &u)
		return u, nil
	}
	d, err := os.Open("/proc")
	if err != nil {
		return u, errdefs.Errorf(errdefs.ErrInternal, "root-usage: %v", err)
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxProcScan)
	for _, name := range names {
		if _, err := strconv.ParseUint(name, 10, 32); err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+name+"/root", &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			continue
		}
		stat := readSmall("/proc/" + name + "/stat")
		// The fields after the command (which may hold spaces and
		// parentheses): state is field 3, utime 14 ... cstime 17.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue // the process ended meanwhile
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 15 {
			continue
		}
		tick := func(k int) uint64 {
			n, _ := strconv.ParseUint(fields[k-3], 10, 64)
			return n * (1e6 / userHZ)
		}
		u.Pids++
		u.UserUsec += tick(14) + tick(16)
		u.SystemUsec += tick(15) + tick(17)
		sc := bufio.NewScanner(bytes.NewReader(readSmall("/proc/" + name + "/status")))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "VmRSS":
				u.RSS += kb << 10
			case "RssAnon":
				u.Anon += kb << 10
			case "RssFile":
				u.File += kb << 10
			case "RssShmem":
				u.Shmem += kb << 10
			}
		}
	}
	return u, nil
}

// readMeminfo fills the box's MemTotal and MemAvailable.
func readMeminfo(u *protocol.RootUsage) {
	sc := bufio.NewScanner(bytes.NewReader(readSmall("/proc/meminfo")))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			u.BoxMemory = kb << 10
		case "MemAvailable":
			u.BoxAvailable = kb << 10
		}
	}
}

// readSmall reads at most 16 KiB of a /proc file (nil on an error: the
// process may have ended).
func readSmall(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 16<<10))
	return b
}
