package protocol

import "github.com/boxlite/boxlite/errdefs"

// RootCgroup is TRootCgroup's body: the root, the name of its cgroup and
// its limits; each limit 0 is none ("max"). MemoryMax is memory.max in
// bytes; CPUQuota and CPUPeriod are cpu.max in microseconds (a quota
// needs a period); CPUWeight is cpu.weight (1-10000, 0: the default 100);
// PidsMax is pids.max.
type RootCgroup struct {
	Root      string `msgpack:"root"`
	Name      string `msgpack:"name"`
	MemoryMax uint64 `msgpack:"memory_max,omitempty"`
	CPUQuota  uint64 `msgpack:"cpu_quota,omitempty"`
	CPUPeriod uint64 `msgpack:"cpu_period,omitempty"`
	CPUWeight uint64 `msgpack:"cpu_weight,omitempty"`
	PidsMax   uint64 `msgpack:"pids_max,omitempty"`
}

// RootOOMRequest is TRootOOM's body: the root whose cgroup to watch.
type RootOOMRequest struct {
	Root string `msgpack:"root"`
}

// RootOOMRecord is the size of one TRootOOM record: the cgroup's OOM
// kill count, a big-endian uint64.
const RootOOMRecord = 8

// Bounds of RootCgroup, checked by both ends.
const (
	MaxCgroupName = 128
	MaxCPUPeriod  = 1_000_000 // cpu.max's period: 1 ms to 1 s
	MinCPUPeriod  = 1_000
	MaxCPUWeight  = 10_000
)

// CheckRootCgroup validates a RootCgroup: the name is 1-128 of [A-Za-z0-9_.-]
// starting with a letter or digit; the limits within the kernel's ranges.
func CheckRootCgroup(c RootCgroup) error {
	if c.Name == "" || len(c.Name) > MaxCgroupName {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: cgroup name %q: 1 to %d characters", c.Name, MaxCgroupName)
	}
	for i, r := range c.Name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && (r == '_' || r == '.' || r == '-')
		if !ok {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: cgroup name %q: only letters, digits and _ . - (not first)", c.Name)
		}
	}
	if c.CPUQuota > 0 && (c.CPUPeriod < MinCPUPeriod || c.CPUPeriod > MaxCPUPeriod) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: cpu period %d: a quota needs a period of %d to %d us", c.CPUPeriod, MinCPUPeriod, MaxCPUPeriod)
	}
	if c.CPUQuota > 0 && c.CPUQuota < MinCPUPeriod {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: cpu quota %d: at least %d us", c.CPUQuota, MinCPUPeriod)
	}
	if c.CPUQuota > 1<<40 || c.MemoryMax > 1<<50 || c.PidsMax > 1<<22 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: a limit out of range (cpu quota %d, memory %d, pids %d)", c.CPUQuota, c.MemoryMax, c.PidsMax)
	}
	if c.CPUWeight > MaxCPUWeight {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "root cgroup: cpu weight %d: at most %d", c.CPUWeight, MaxCPUWeight)
	}
	return nil
}
