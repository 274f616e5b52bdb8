package k8sshim

import (
	"context"
	"time"

	cgroupstats "github.com/containerd/cgroups/v3/cgroup2/stats"
	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/boxlite/boxlite/errdefs"
)

// statsTimeout bounds a container's measure in its box.
const statsTimeout = 10 * time.Second

// Stats answers a container's usage as cgroups v2 metrics
// (io.containerd.cgroups.v2.Metrics, what ctr task metrics and the CRI
// plugin read). In a box with cgroups they are the container's cgroup's
// (pids.current and pids.max, cpu.stat, memory.current, memory.stat,
// memory.max, memory.events' oom_kill); otherwise its processes' CPU time,
// resident memory and count, summed in the box (Box.RootUsage). The
// memory limit is the cgroup's, else the container's own, else the box's
// memory.
func (s *service) Stats(ctx context.Context, r *taskapi.StatsRequest) (_ *taskapi.StatsResponse, err error) {
	defer func() { err = rpcError(err) }()
	c, _, err := s.lookup(r.ID, "")
	if err != nil {
		return nil, err
	}
	if c.pod == nil || c.pod.box == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "container %s: its pod has no box", r.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	u, err := c.pod.box.RootUsage(ctx, c.boxRoot)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	limit := c.memLimit
	s.mu.Unlock()
	if u.Cgroup {
		limit = u.MemoryMax
	}
	if limit == 0 {
		limit = u.BoxMemory
	}
	m := &cgroupstats.Metrics{
		Pids: &cgroupstats.PidsStat{Current: u.Pids, Limit: u.PidsMax},
		CPU: &cgroupstats.CPUStat{UsageUsec: u.UserUsec + u.SystemUsec, UserUsec: u.UserUsec, SystemUsec: u.SystemUsec,
			ThrottledUsec: u.ThrottledUsec},
		Memory: &cgroupstats.MemoryStat{Usage: u.RSS, UsageLimit: limit, Anon: u.Anon, File: u.File, Shmem: u.Shmem,
			MaxUsage: u.RSS},
	}
	if u.Cgroup {
		m.MemoryEvents = &cgroupstats.MemoryEvents{OomKill: u.OOMKills}
	}
	any, err := typeurl.MarshalAny(m)
	if err != nil {
		return nil, err
	}
	return &taskapi.StatsResponse{Stats: &anypb.Any{TypeUrl: any.GetTypeUrl(), Value: any.GetValue()}}, nil
}
