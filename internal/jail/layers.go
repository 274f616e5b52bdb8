package jail

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Layer is one confinement layer: applied or not, and how or why not.
type Layer struct {
	Applied bool
	Note    string
}

// Layers is every layer of the jail. Probe fills it with what the host can
// give; Cmd.Layers with what a started program got.
type Layers struct {
	UID        Layer // runs as Spec.UID/GID, no groups, no capabilities (root callers)
	MountNS    Layer // own mount namespace
	PivotRoot  Layer // / holds only /usr, the binds and devices; the host's root is detached
	NetNS      Layer // own, empty network namespace
	IPCNS      Layer // own System V IPC namespace
	PIDNS      Layer // own PID namespace: no process outside is visible or signalled
	Memory     Layer // cgroup memory limit
	Pids       Layer // cgroup pids limit
	CPU        Layer // cgroup cpu weight
	Rlimits    Layer
	NoNewPrivs Layer
	Seccomp    Layer // the jail's own denylist, under the program's own filter
}

// NamedLayer is a Layer with its name, as All lists them.
type NamedLayer struct {
	Name string
	Layer
}

// All lists the layers in a fixed order with their names.
func (l Layers) All() []NamedLayer {
	return []NamedLayer{
		{"uid", l.UID}, {"mount namespace", l.MountNS}, {"pivot_root", l.PivotRoot},
		{"network namespace", l.NetNS}, {"ipc namespace", l.IPCNS}, {"pid namespace", l.PIDNS},
		{"cgroup memory", l.Memory}, {"cgroup pids", l.Pids}, {"cgroup cpu", l.CPU},
		{"rlimits", l.Rlimits}, {"no_new_privs", l.NoNewPrivs}, {"seccomp", l.Seccomp},
	}
}

// Missing lists the layers not applied.
func (l Layers) Missing() []NamedLayer {
	var m []NamedLayer
	for _, n := range l.All() {
		if !n.Applied {
			m = append(m, n)
		}
	}
	return m
}

// String is one line per missing layer, "jail: <layer> missing: <why>", or
// "" when every layer is applied.
func (l Layers) String() string {
	var b strings.Builder
	for _, n := range l.Missing() {
		fmt.Fprintf(&b, "jail: %s missing: %s\n", n.Name, n.Note)
	}
	return b.String()
}

// merge takes the layers the stage owns from s.
func (l *Layers) merge(s *Layers) {
	l.UID, l.PivotRoot, l.Rlimits, l.NoNewPrivs, l.Seccomp = s.UID, s.PivotRoot, s.Rlimits, s.NoNewPrivs, s.Seccomp
}

// Probe reports what this host can give a Spec with every limit set,
// without starting anything. Cmd.Layers is the authority for one program:
// a host may still refuse at run time (a user namespace without the right
// to mount in it, a cgroup whose controllers cannot be enabled).
func Probe() Layers {
	var l Layers
	root := os.Geteuid() == 0
	ns := Layer{Applied: true, Note: "new namespace"}
	if root {
		l.UID = Layer{Applied: true, Note: "caller is root: drops to Spec.UID/GID"}
		if !hasCap(unix.CAP_SETUID) || !hasCap(unix.CAP_SETGID) {
			l.UID = Layer{Note: "root without CAP_SETUID/CAP_SETGID"}
		}
		if !hasCap(unix.CAP_SYS_ADMIN) {
			ns = Layer{Note: "root without CAP_SYS_ADMIN"}
		}
	} else {
		l.UID.Note = fmt.Sprintf("caller is not root: runs as its uid %d", os.Getuid())
		if why := usernsBlocked(); why != "" {
			ns = Layer{Note: "not root and " + why}
		} else {
			ns.Note = "new namespace inside a user namespace"
		}
	}
	l.MountNS, l.NetNS, l.IPCNS, l.PIDNS = ns, ns, ns, ns
	if why := pidnsBlocked(); why != "" && ns.Applied {
		l.PIDNS = Layer{Note: why}
	}
	l.PivotRoot = Layer{Applied: ns.Applied, Note: "needs the mount namespace"}
	if ns.Applied {
		l.PivotRoot.Note = "new root on tmpfs"
	}
	for _, ly := range []*Layer{&l.Memory, &l.Pids, &l.CPU} {
		ly.Note = "unknown"
	}
	if hs, err := hierarchies(); err != nil {
		for _, ly := range []*Layer{&l.Memory, &l.Pids, &l.CPU} {
			ly.Note = err.Error()
		}
	} else {
		for _, h := range hs {
			for _, c := range h.ctrls {
				ly := layerOf(&l, c)
				switch {
				case h.why != "":
					ly.Note = h.why
				case h.v2:
					*ly = Layer{Applied: true, Note: "cgroup v2 leaf in " + h.parent}
				default:
					*ly = Layer{Applied: true, Note: "cgroup v1 leaf in " + h.parent}
				}
			}
		}
	}
	l.Rlimits = Layer{Applied: true, Note: "setrlimit"}
	l.NoNewPrivs = Layer{Applied: true, Note: "prctl"}
	switch {
	case seccompArch == 0:
		l.Seccomp.Note = "no filter for this architecture"
	case !seccompFilterAvail():
		l.Seccomp.Note = "the kernel has no seccomp filter mode"
	default:
		l.Seccomp = Layer{Applied: true, Note: "denylist filter"}
	}
	return l
}

// hasCap reports whether the calling thread has capability c in its
// effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if unix.Capget(&hdr, &d[0]) != nil {
		return false
	}
	return d[c/32].Effective&(1<<(c%32)) != 0
}

func seccompFilterAvail() bool {
	if _, err := os.Stat("/proc/sys/kernel/seccomp/actions_avail"); err == nil {
		return true
	}
	// Older kernels: PR_GET_SECCOMP works when seccomp is built in.
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	return err == nil
}

// pidnsBlocked says why no PID namespace can be made, as far as the sysctl
// tells, or "" when it looks possible: the other namespaces are then still
// given.
func pidnsBlocked() string {
	if b, err := os.ReadFile("/proc/sys/user/max_pid_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "PID namespaces are disabled (user.max_pid_namespaces=0)"
	}
	return ""
}

// usernsBlocked says why an unprivileged user namespace cannot be made, as
// far as the sysctls tell, or "" when it looks possible.
func usernsBlocked() string {
	read := func(p string) (int, bool) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil
	}
	if n, ok := read("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		return "user namespaces are disabled (user.max_user_namespaces=0)"
	}
	if n, ok := read("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
		return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
	}
	if n, ok := read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return "the kernel has no user namespaces"
	}
	return ""
}
