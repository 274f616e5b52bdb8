package boxlite

import (
	"context"
	"fmt"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// ReleaseRoot undoes what the box's agent mounted into a Command.Root for
// its commands (the box's /proc, /dev and /sys, the RootBinds), once no
// process runs there any more: a container's end (the containerd shim
// releases each container's root when containerd deletes it). A later
// command in that root readies it again; a root never used is no error, and
// neither is a box that is not running (its mounts ended with its VM).
// ErrUnsupported: the box runs an agent without process roots.
func (b *Box) ReleaseRoot(ctx context.Context, root string) error {
	what := fmt.Sprintf("release root %s", root)
	b.mu.Lock()
	c, state, info := b.conn, b.state, b.info
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		return nil
	}
	if !info.Hello.Has(protocol.FeatureExecRoot) {
		return errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s runs an agent without process roots (%s)", what, b.rec.ID, info.Hello.Agent)
	}
	s := newCopyStream(c, what)
	if _, err := c.open(s, protocol.TReleaseRoot, protocol.ReleaseRoot{Root: root}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.wait(ctx)
}

// RootUsage is what the processes running in a Command.Root use now.
// With Cgroup set it is the root's cgroup's (SetRootLimits): pids.current,
// cpu.stat, memory.current (RSS) and memory.stat, with its limits,
// memory.events' OOM kills and the time cpu.max throttled it. Otherwise
// it is summed over the processes from the box's /proc: CPU time of the
// live processes and of the children they waited for (a process reaped
// by the box's init takes its time with it), and their resident memory
// (pages they share counted once per process). The box's memory and what
// is available of it come along.
type RootUsage struct {
	Pids                    uint64
	UserUsec, SystemUsec    uint64
	RSS, Anon, File, Shmem  uint64 // bytes
	BoxMemory, BoxAvailable uint64 // bytes

	Cgroup             bool
	MemoryMax, PidsMax uint64 // 0: none
	OOMKills           uint64
	ThrottledUsec      uint64
}

// maxRootPids bounds a root's pids as a box reports them (the kernel's
// PID_MAX_LIMIT).
const maxRootPids = 1 << 22

// check refuses an answer no box could give.
func (u RootUsage) check() error {
	bad := u.Pids > maxRootPids || u.PidsMax > maxRootPids || u.BoxAvailable > u.BoxMemory
	if u.Cgroup {
		// A cgroup's charge is the box's memory at most, and its parts are
		// within it (memory.stat's per-CPU counters may lag the charge a
		// little: statSlack).
		const statSlack = 64 << 20
		bad = bad || u.BoxMemory > 0 && u.RSS > u.BoxMemory || u.Anon > u.RSS+statSlack || u.File > u.RSS+statSlack ||
			u.Shmem > u.File+statSlack || u.MemoryMax > 1<<50
	}
	if bad {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "the box answered an impossible usage (%+v)", u)
	}
	return nil
}

// RootUsage measures the processes whose root is root (a Command.Root).
// ErrNotFound: no such directory in the box; ErrUnsupported: the box runs
// an agent without protocol.FeatureRootUsage; ErrInvalidState: the box is
// not running.
func (b *Box) RootUsage(ctx context.Context, root string) (RootUsage, error) {
	what := fmt.Sprintf("usage of root %s", root)
	b.mu.Lock()
	c, state, info := b.conn, b.state, b.info
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		return RootUsage{}, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is not running", what, b.rec.ID)
	}
	if !info.Hello.Has(protocol.FeatureRootUsage) {
		return RootUsage{}, errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s runs an agent without it (%s)", what, b.rec.ID, info.Hello.Agent)
	}
	var u protocol.RootUsage
	got := false
	s := newCopyStream(c, what)
	s.data = func(p []byte) error {
		if got || len(p) > protocol.MaxRootUsageFrame {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "a second or oversized answer (%d bytes)", len(p))
		}
		got = true
		return protocol.Decode(protocol.Frame{Type: protocol.TStdout, Payload: p}, &u)
	}
	if _, err := c.open(s, protocol.TRootUsage, protocol.RootUsageRequest{Root: root}); err != nil {
		return RootUsage{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := s.wait(ctx); err != nil {
		return RootUsage{}, err
	}
	if !got {
		return RootUsage{}, errdefs.Errorf(errdefs.ErrInternal, "%s: the box answered nothing", what)
	}
	ru := RootUsage{Pids: u.Pids, UserUsec: u.UserUsec, SystemUsec: u.SystemUsec, RSS: u.RSS, Anon: u.Anon,
		File: u.File, Shmem: u.Shmem, BoxMemory: u.BoxMemory, BoxAvailable: u.BoxAvailable,
		Cgroup: u.Cgroup, MemoryMax: u.MemoryMax, PidsMax: u.PidsMax, OOMKills: u.OOMKills, ThrottledUsec: u.Throttled}
	if err := ru.check(); err != nil {
		return RootUsage{}, fmt.Errorf("%s: %w", what, err)
	}
	return ru, nil
}
