//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// The box's cgroups (cgroup v2, when its kernel has them): the agent
// mounts the hierarchy at /sys/fs/cgroup, enables the memory, cpu and pids
// controllers, and makes the process roots' cgroups (TRootCgroup) under
// /sys/fs/cgroup/boxlite/, one per root, named by the host (a container's
// id). Only the agent makes or removes them; the box's processes see the
// hierarchy read-only (sandboxinit.go). A root's processes start in its
// cgroup through the exec gate (execgate.go): the agent moves the gate
// there before it executes the program, so every process of the program
// is counted and limited from its first instruction.

const (
	cgroupMount  = "/sys/fs/cgroup"
	cgroupParent = cgroupMount + "/boxlite"
	// cgroupControllers are enabled for the roots' cgroups.
	cgroupControllers = "+memory +cpu +pids"
	// maxRootCgroups bounds the roots' cgroups of one box.
	maxRootCgroups = 1024
	// cgroupKillWait bounds how long a release waits for a cgroup's
	// processes to end after cgroup.kill.
	cgroupKillWait = 5 * time.Second
)

// cgroupTree is the box's cgroups: whether they are there, and the
// process roots' (box path of the root -> cgroup directory).
type cgroupTree struct {
	mu    sync.Mutex
	ok    bool
	roots map[string]string
	names map[string]string // cgroup name -> box path of its root
}

var cgroups = &cgroupTree{roots: map[string]string{}, names: map[string]string{}}

// mountCgroups mounts cgroup2 and readies the roots' parent. A kernel
// without cgroups is no error: the box then runs without them.
func mountCgroups() error {
	if fi, err := os.Stat(cgroupMount); err != nil || !fi.IsDir() {
		return nil // no CONFIG_CGROUPS: sysfs has no /sys/fs/cgroup
	}
	if err := unix.Mount("cgroup2", cgroupMount, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount cgroup2 on %s: %w", cgroupMount, err)
		}
	}
	if err := writeCgroup(cgroupMount, "cgroup.subtree_control", cgroupControllers); err != nil {
		return err
	}
	if err := os.Mkdir(cgroupParent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := writeCgroup(cgroupParent, "cgroup.subtree_control", cgroupControllers); err != nil {
		return err
	}
	cgroups.mu.Lock()
	cgroups.ok = true
	cgroups.mu.Unlock()
	return nil
}

// haveCgroups reports whether the box's cgroups are mounted and ready.
func haveCgroups() bool {
	cgroups.mu.Lock()
	defer cgroups.mu.Unlock()
	return cgroups.ok
}

// of is the cgroup directory of the root at boxPath ("" for none).
func (t *cgroupTree) of(boxPath string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.roots[boxPath]
}

func writeCgroup(dir, file, value string) error {
	f, err := os.OpenFile(dir+"/"+file, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(value); err != nil {
		return fmt.Errorf("write %q to %s/%s: %w", value, dir, file, err)
	}
	return nil
}

// limitValues are the files and values that set c's limits.
func limitValues(c protocol.RootCgroup) [][2]string {
	num := func(v uint64) string {
		if v == 0 {
			return "max"
		}
		return strconv.FormatUint(v, 10)
	}
	period := c.CPUPeriod
	if period == 0 {
		period = 100_000
	}
	weight := c.CPUWeight
	if weight == 0 {
		weight = 100
	}
	return [][2]string{
		{"memory.max", num(c.MemoryMax)},
		{"cpu.max", num(c.CPUQuota) + " " + strconv.FormatUint(period, 10)},
		{"cpu.weight", strconv.FormatUint(weight, 10)},
		{"pids.max", num(c.PidsMax)},
	}
}

// setRootCgroup makes (or finds) the cgroup of the root at boxPath and
// sets its limits.
func (t *cgroupTree) set(boxPath string, c protocol.RootCgroup) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ok {
		return errdefs.Errorf(errdefs.ErrUnsupported, "root-cgroup: the box's kernel has no cgroups")
	}
	dir := cgroupParent + "/" + c.Name
	if owner, ok := t.names[c.Name]; ok && owner != boxPath {
		return errdefs.Errorf(errdefs.ErrAlreadyExists, "root-cgroup: cgroup %s belongs to root %s", c.Name, owner)
	}
	if have, ok := t.roots[boxPath]; ok && have != dir {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root-cgroup: root %s has cgroup %s already", boxPath, path.Base(have))
	}
	if _, ok := t.roots[boxPath]; !ok {
		if len(t.roots) >= maxRootCgroups {
			return errdefs.Errorf(errdefs.ErrLimit, "root-cgroup: %d roots have cgroups, limit %d", len(t.roots), maxRootCgroups)
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return errdefs.Errorf(errdefs.ErrInternal, "root-cgroup: %v", err)
		}
		t.roots[boxPath], t.names[c.Name] = dir, boxPath
	}
	for _, kv := range limitValues(c) {
		if err := writeCgroup(dir, kv[0], kv[1]); err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "root-cgroup %s: %v", c.Name, err)
		}
	}
	return nil
}

// remove kills what still runs in the cgroup of the root at boxPath and
// removes it (a root without one: nothing to do).
func (t *cgroupTree) remove(boxPath string) error {
	t.mu.Lock()
	dir, ok := t.roots[boxPath]
	if ok {
		delete(t.roots, boxPath)
		delete(t.names, path.Base(dir))
	}
	t.mu.Unlock()
	if !ok {
		return nil
	}
	if err := writeCgroup(dir, "cgroup.kill", "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	deadline := time.Now().Add(cgroupKillWait)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		waitUnpopulated(dir, time.Until(deadline))
	}
}

// waitUnpopulated waits (at most d) until cgroup.events says the cgroup
// has no process left: the kernel notifies a change of the file with
// POLLPRI.
func waitUnpopulated(dir string, d time.Duration) {
	f, err := os.Open(dir + "/cgroup.events")
	if err != nil {
		return
	}
	defer f.Close()
	deadline := time.Now().Add(d)
	b := make([]byte, 256)
	for {
		n, _ := f.ReadAt(b, 0)
		left := time.Until(deadline)
		if strings.Contains(string(b[:n]), "populated 0") || left <= 0 {
			return
		}
		pfd := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if n, err := unix.Poll(pfd, int(left/time.Millisecond)+1); n <= 0 && err != unix.EINTR {
			return
		}
	}
}

// readCgroupUsage fills u from the cgroup at dir.
func readCgroupUsage(dir string, u *protocol.RootUsage) {
	num := func(file string) uint64 {
		s := strings.TrimSpace(string(readSmall(dir + "/" + file)))
		n, _ := strconv.ParseUint(s, 10, 64) // "max" is 0: no limit
		return n
	}
	keyed := func(file string) map[string]uint64 {
		m := map[string]uint64{}
		for _, line := range strings.Split(string(readSmall(dir+"/"+file)), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if n, err := strconv.ParseUint(v, 10, 64); ok && err == nil {
				m[k] = n
			}
		}
		return m
	}
	u.Cgroup = true
	u.Pids = num("pids.current")
	u.PidsMax = num("pids.max")
	u.RSS = num("memory.current")
	u.MemoryMax = num("memory.max")
	cpu := keyed("cpu.stat")
	u.UserUsec, u.SystemUsec, u.Throttled = cpu["user_usec"], cpu["system_usec"], cpu["throttled_usec"]
	mem := keyed("memory.stat")
	u.Anon, u.File, u.Shmem = mem["anon"], mem["file"], mem["shmem"]
	u.OOMKills = keyed("memory.events")["oom_kill"]
}

// rootCgroup serves TRootCgroup.
func (s *server) rootCgroup(f protocol.Frame) {
	id := f.Stream
	var req protocol.RootCgroup
	err := protocol.Decode(f, &req)
	if err == nil {
		err = protocol.CheckRootCgroup(req)
	}
	if err == nil {
		err = checkRoot(req.Root)
	}
	if err == nil && (id == 0 || s.cfg.Sandbox == nil) {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "root-cgroup: needs a stream of its own and the box sandbox")
	}
	if err != nil {
		s.sendError(id, err)
		return
	}
	go func() {
		boxPath, err := s.cfg.Sandbox.rootBoxPath(req.Root)
		if err == nil {
			err = cgroups.set(boxPath, req)
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

// rootBoxPath resolves root (a process root as the host names it) to the
// box path of its directory, which must exist.
func (sb *Sandbox) rootBoxPath(root string) (string, error) {
	g, err := sb.current()
	if err != nil {
		return "", err
	}
	agentPath, err := resolveIn(g.root(), root)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(agentPath); err == nil && !fi.IsDir() {
			err = unix.ENOTDIR
		}
	}
	if err != nil {
		return "", errdefs.Errorf(errdefs.ErrNotFound, "root %q: no such directory", root)
	}
	return g.boxPath(agentPath), nil
}
