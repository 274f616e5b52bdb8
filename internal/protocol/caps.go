package protocol

import (
	"math/bits"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// Linux capabilities by number (linux/capability.h; the numbers are the
// kernel's ABI). A box's processes get DefaultCaps unless its options add
// or drop some (SandboxPolicy.Caps).
var capNames = [...]string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// AllCaps has a bit for every capability capNames names.
const AllCaps = uint64(1)<<len(capNames) - 1

// DefaultCaps is the capability bounding set of box processes: docker's
// default set without MKNOD. Docker keeps MKNOD because its device cgroup
// decides which nodes may be opened; a box has no device cgroup, so a root
// process that could mknod could reach any device (the agent's virtio port,
// the raw disks).
var DefaultCaps = mustCaps("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "NET_BIND_SERVICE", "NET_RAW", "SYS_CHROOT", "AUDIT_WRITE", "SETFCAP")

func mustCaps(names ...string) uint64 {
	m, err := CapMask(0, names, nil)
	if err != nil {
		panic(err)
	}
	return m
}

// CapNumber is the number of the capability name: "NET_ADMIN" or
// "CAP_NET_ADMIN", any case. ok is false for a name Linux does not have.
func CapNumber(name string) (n int, ok bool) {
	u := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")
	for i, c := range capNames {
		if c == u {
			return i, true
		}
	}
	return 0, false
}

// CapMask is base with the capabilities add added, then drop removed (so a
// name in both is dropped), as docker's --cap-add/--cap-drop. "ALL" in add
// is every capability, in drop every one. An unknown name is
// ErrInvalidArgument naming it.
func CapMask(base uint64, add, drop []string) (uint64, error) {
	m := base
	apply := func(names []string, set bool, what string) error {
		for _, name := range names {
			var bit uint64
			if strings.EqualFold(strings.TrimSpace(name), "ALL") {
				bit = AllCaps
			} else if n, ok := CapNumber(name); ok {
				bit = 1 << n
			} else {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "capabilities.%s: unknown capability %q (want a Linux capability such as NET_ADMIN or CAP_NET_ADMIN, or ALL)", what, name)
			}
			if set {
				m |= bit
			} else {
				m &^= bit
			}
		}
		return nil
	}
	if err := apply(add, true, "add"); err != nil {
		return 0, err
	}
	if err := apply(drop, false, "drop"); err != nil {
		return 0, err
	}
	return m, nil
}

// CapNames are the names of the capabilities in m, in number order.
func CapNames(m uint64) []string {
	out := make([]string, 0, bits.OnesCount64(m))
	for i, c := range capNames {
		if m&(1<<i) != 0 {
			out = append(out, c)
		}
	}
	return out
}

// SandboxPolicy is how the guest's sandbox walls off the box's processes,
// when the box's options change it from the default (Identity.Sandbox,
// needs FeatureSandboxPolicy).
type SandboxPolicy struct {
	// Caps is the capability bounding set of box processes (bits by
	// capability number, within AllCaps).
	Caps uint64 `msgpack:"caps"`
	// NoSeccomp: box processes run without the box's seccomp filter.
	NoSeccomp bool `msgpack:"no_seccomp,omitempty"`
}

// Check reports what is wrong with p, as ErrInvalidArgument.
func (p SandboxPolicy) Check() error {
	if p.Caps&^AllCaps != 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "sandbox policy: capability bits %#x beyond the last capability", p.Caps&^AllCaps)
	}
	return nil
}
