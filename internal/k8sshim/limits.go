package k8sshim

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"strings"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// A container runs in a cgroup of its own in the box (named by its id,
// made by the box's agent: boxlite.Box.SetRootLimits) with its spec's
// memory, CPU and pids limits; Update changes them while it runs. Its OOM
// kills come from the cgroup's memory.events (boxlite.Box.WatchRootOOM)
// and are published as TaskOOM, before the exit of the process the kernel
// killed: the CRI plugin then gives the container the reason OOMKilled.
// In a box whose kernel has no cgroups the container runs without limits.

// ociResources is the part of an OCI spec's linux.resources the shim
// applies: the container's, and what Update sends.
type ociResources struct {
	Memory *struct {
		Limit *int64 `json:"limit"`
	} `json:"memory"`
	CPU *struct {
		Shares *uint64 `json:"shares"`
		Quota  *int64  `json:"quota"`
		Period *uint64 `json:"period"`
	} `json:"cpu"`
	Pids *struct {
		Limit int64 `json:"limit"`
	} `json:"pids"`
}

// limits are the cgroup limits of r: a memory limit, a CPU quota and the
// shares (as cgroup v2's weight, runc's formula), a pids limit; what is
// not set, or not positive, is none.
func (r *ociResources) limits() (boxlite.RootLimits, error) {
	var l boxlite.RootLimits
	if r == nil {
		return l, nil
	}
	if r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit > 0 {
		l.MemoryMax = uint64(*r.Memory.Limit)
	}
	if c := r.CPU; c != nil {
		if c.Quota != nil && *c.Quota > 0 {
			l.CPUQuota, l.CPUPeriod = uint64(max(*c.Quota, protocol.MinCPUPeriod)), 100_000
			if c.Period != nil && *c.Period != 0 {
				l.CPUPeriod = *c.Period
			}
		}
		if c.Shares != nil && *c.Shares != 0 {
			shares := min(max(*c.Shares, 2), 262144)
			l.CPUWeight = 1 + (shares-2)*9999/262142
		}
	}
	if r.Pids != nil && r.Pids.Limit > 0 {
		l.PidsMax = uint64(r.Pids.Limit)
	}
	err := protocol.CheckRootCgroup(protocol.RootCgroup{Name: "x", MemoryMax: l.MemoryMax, CPUQuota: l.CPUQuota,
		CPUPeriod: l.CPUPeriod, CPUWeight: l.CPUWeight, PidsMax: l.PidsMax})
	return l, err
}

// limitTimeout bounds setting a container's limits in its box.
const limitTimeout = 10 * time.Second

// applyLimits gives c its cgroup with limits l and watches it for OOM
// kills (the first time). A box without cgroups is no error at create: c
// then runs without limits (logged); an update fails (ErrUnsupported).
func (s *service) applyLimits(ctx context.Context, c *container, l boxlite.RootLimits, update bool) error {
	ctx, cancel := context.WithTimeout(ctx, limitTimeout)
	defer cancel()
	box := c.pod.box
	err := box.SetRootLimits(ctx, c.boxRoot, c.id, l)
	if errors.Is(err, errdefs.ErrUnsupported) && !update {
		log.Printf("container %s: no limits: %v", c.id, err)
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	watching := c.oom != nil
	s.mu.Unlock()
	if watching {
		return nil
	}
	w, err := box.WatchRootOOM(ctx, c.boxRoot, func(kills uint64) { s.noteOOM(c, kills, false) })
	if err != nil {
		return err
	}
	// Another call may have started one meanwhile, or Delete stopped the
	// container's: then this watch goes.
	s.mu.Lock()
	keep := c.oom == nil && !c.oomStopped
	if keep {
		c.oom = w
	}
	s.mu.Unlock()
	if !keep {
		w.Close()
	}
	return nil
}

// oomEventGap is the least time between two TaskOOM events of one
// container: the kill count is the box's word, which a hostile guest could
// make grow as fast as the channel carries it, and every event reaches
// containerd. CRI takes only the fact (the reason OOMKilled), not the count.
const oomEventGap = time.Second

// noteOOM publishes TaskOOM when c's cgroup counts more OOM kills than
// were published, at most once per oomEventGap unless atExit (the init
// has exited: what is unpublished goes out before its exit event).
func (s *service) noteOOM(c *container, kills uint64, atExit bool) {
	now := time.Now()
	s.mu.Lock()
	if kills > c.oomKills {
		c.oomKills = kills
	}
	publish := c.oomKills > c.oomPublished && (atExit || now.Sub(c.oomAt) >= oomEventGap)
	if publish {
		c.oomPublished, c.oomAt = c.oomKills, now
	}
	s.mu.Unlock()
	if publish {
		s.events.publish(topicOOM, &eventstypes.TaskOOM{ContainerID: c.id})
	}
}

// checkOOM asks c's cgroup for its OOM kills now (the init process has
// exited: a kill the watch has not told yet must be published before the
// exit).
func (s *service) checkOOM(c *container) {
	s.mu.Lock()
	watching := c.oom != nil
	s.mu.Unlock()
	if !watching {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	if u, err := c.pod.box.RootUsage(ctx, c.boxRoot); err == nil && u.Cgroup {
		s.noteOOM(c, u.OOMKills, true)
	}
}

// stopOOMWatch ends c's OOM watch.
func (s *service) stopOOMWatch(c *container) {
	s.mu.Lock()
	w := c.oom
	c.oom, c.oomStopped = nil, true
	s.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// maxUpdateResources bounds Update's resources (JSON).
const maxUpdateResources = 64 << 10

// Update changes a running container's limits (the OCI LinuxResources in
// the request: memory limit, CPU quota, period and shares, pids limit;
// each absent one becomes none); ErrUnsupported in a box without
// cgroups. On the pod sandbox's task it changes the
// pause container's cgroup: the box itself keeps the memory and CPUs it
// booted with (QEMU hot-plugs neither here).
func (s *service) Update(ctx context.Context, r *taskapi.UpdateTaskRequest) (_ *emptypb.Empty, err error) {
	defer func() { err = rpcError(err) }()
	c, _, err := s.lookup(r.ID, "")
	if err != nil {
		return nil, err
	}
	if r.Resources == nil {
		return &emptypb.Empty{}, nil // annotations only: nothing the shim keeps
	}
	if !strings.HasSuffix(r.Resources.GetTypeUrl(), "/LinuxResources") || len(r.Resources.GetValue()) > maxUpdateResources {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "update %s: resources of type %q (%d bytes): want an OCI LinuxResources",
			r.ID, r.Resources.GetTypeUrl(), len(r.Resources.GetValue()))
	}
	var res ociResources
	if err := json.Unmarshal(r.Resources.GetValue(), &res); err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "update %s: resources: %v", r.ID, err)
	}
	l, err := res.limits()
	if err != nil {
		return nil, err
	}
	if c.pod == nil || c.pod.box == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "update %s: its pod has no box", r.ID)
	}
	if err := s.applyLimits(ctx, c, l, true); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c.memLimit = l.MemoryMax
	s.mu.Unlock()
	return &emptypb.Empty{}, nil
}
