package k8sshim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// idPattern is containerd's rule for identifiers (pkg/identifiers): it
// keeps ids usable as path components, which is how they are used here.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

const maxIDLen = 76

// checkID reports an id containerd would not have made, as
// ErrInvalidArgument, before it reaches a path.
func checkID(what, id string) error {
	if len(id) == 0 || len(id) > maxIDLen || !idPattern.MatchString(id) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s %q: not a containerd identifier (1 to %d of [A-Za-z0-9._-], alphanumeric at both ends)", what, id, maxIDLen)
	}
	return nil
}

// checkBundle checks that a bundle path is an absolute, clean directory.
func checkBundle(bundle string) error {
	if !filepath.IsAbs(bundle) || filepath.Clean(bundle) != bundle {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "bundle %q is not an absolute clean path", bundle)
	}
	fi, err := os.Lstat(bundle)
	if err != nil || !fi.IsDir() {
		return errdefs.Errorf(errdefs.ErrNotFound, "bundle %q: not a directory", bundle)
	}
	return nil
}

// The part of an OCI runtime spec (config.json) the shim uses.
type spec struct {
	Process     *process          `json:"process"`
	Root        *specRoot         `json:"root"`
	Hostname    string            `json:"hostname"`
	Mounts      []specMount       `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
	Linux       *struct {
		Resources  *ociResources `json:"resources"`
		Namespaces []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"namespaces"`
	} `json:"linux"`
}

// hostNetwork reports whether the spec shares the host's network (no
// network namespace of its own: a hostNetwork pod, ctr run --net-host).
func (s *spec) hostNetwork() bool {
	if s.Linux == nil {
		return true
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == "network" {
			return false
		}
	}
	return true
}

// netnsPath is the path of the spec's network namespace ("" for a new
// one or none), checked: absolute, clean, a namespace file.
func (s *spec) netnsPath() (string, error) {
	if s.Linux == nil {
		return "", nil
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type != "network" || ns.Path == "" {
			continue
		}
		var st unix.Statfs_t
		if !filepath.IsAbs(ns.Path) || filepath.Clean(ns.Path) != ns.Path || len(ns.Path) > 4096 ||
			unix.Statfs(ns.Path, &st) != nil || st.Type != unix.NSFS_MAGIC {
			return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "network namespace %q: not an absolute path to a namespace file", ns.Path)
		}
		return ns.Path, nil
	}
	return "", nil
}

type specMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options"`
}

// maxMounts bounds the mounts of a container the shim shares (protocol.MaxRootBinds).
const maxMounts = 64

// shared reports whether the box gets m: a bind of a host directory or
// file (a volume, a hosts file) outside /proc, /dev and /sys, which the
// box has of its own. The rest (proc, tmpfs, devpts, mqueue, sysfs,
// cgroup) are the box's.
func (m specMount) shared() bool {
	bind := m.Type == "bind"
	for _, o := range m.Options {
		bind = bind || o == "bind" || o == "rbind"
	}
	if !bind {
		return false
	}
	for _, sys := range []string{"/proc", "/dev", "/sys"} {
		if m.Destination == sys || strings.HasPrefix(m.Destination, sys+"/") {
			return false
		}
	}
	return true
}

func (m specMount) readOnly() bool {
	ro := false
	for _, o := range m.Options {
		switch o {
		case "ro":
			ro = true
		case "rw":
			ro = false
		}
	}
	return ro
}

func (m specMount) check() error {
	if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Destination) || filepath.Clean(m.Destination) == "/" ||
		len(m.Destination) > 4096 || strings.ContainsRune(m.Source+m.Destination, 0) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "mount %q on %q: want absolute paths (not on /)", m.Source, m.Destination)
	}
	return nil
}

type specRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

// process is an OCI spec's process (also an Exec request's spec).
type process struct {
	Terminal    bool `json:"terminal"`
	ConsoleSize *struct {
		Height uint `json:"height"`
		Width  uint `json:"width"`
	} `json:"consoleSize"`
	User struct {
		UID            uint32   `json:"uid"`
		GID            uint32   `json:"gid"`
		AdditionalGids []uint32 `json:"additionalGids"`
	} `json:"user"`
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	Cwd     string   `json:"cwd"`
	Rlimits []struct {
		Type string `json:"type"`
		Hard uint64 `json:"hard"`
		Soft uint64 `json:"soft"`
	} `json:"rlimits"`
}

// maxSpec bounds a config.json or a process spec read by the shim.
const maxSpec = 4 << 20

func readSpec(bundle string) (*spec, error) {
	f, err := os.Open(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "bundle %s: %v", bundle, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSpec+1))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "bundle %s: config.json: %v", bundle, err)
	}
	if len(b) > maxSpec {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "bundle %s: config.json is larger than %d bytes", bundle, maxSpec)
	}
	var s spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "bundle %s: config.json: %v", bundle, err)
	}
	if s.Process == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "bundle %s: config.json has no process", bundle)
	}
	return &s, s.Process.check()
}

func parseProcess(b []byte) (*process, error) {
	if len(b) > maxSpec {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "exec: process spec larger than %d bytes", maxSpec)
	}
	var p process
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "exec: process spec: %v", err)
	}
	return &p, p.check()
}

func (p *process) check() error {
	if len(p.Args) == 0 || p.Args[0] == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "process: no args")
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "process: cwd %q is not absolute", p.Cwd)
	}
	if len(p.User.AdditionalGids) > protocol.MaxGroups || len(p.Rlimits) > protocol.MaxRlimits {
		return errdefs.Errorf(errdefs.ErrLimit, "process: %d additionalGids, %d rlimits: limits %d, %d",
			len(p.User.AdditionalGids), len(p.Rlimits), protocol.MaxGroups, protocol.MaxRlimits)
	}
	for _, r := range p.Rlimits {
		if !strings.HasPrefix(r.Type, "RLIMIT_") || r.Soft > r.Hard {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "process: rlimit %q %d:%d: want RLIMIT_*, soft <= hard", r.Type, r.Soft, r.Hard)
		}
	}
	for _, kv := range p.Env {
		if k, _, ok := cutEnv(kv); !ok || k == "" {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "process: env entry %q is not KEY=VALUE", kv)
		}
	}
	return nil
}

func cutEnv(kv string) (k, v string, ok bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// env is the process's environment as a map (a later entry wins, as in
// execve's users).
func (p *process) env() map[string]string {
	m := make(map[string]string, len(p.Env))
	for _, kv := range p.Env {
		k, v, _ := cutEnv(kv)
		m[k] = v
	}
	return m
}

// rlimits are the process's rlimits as boxlite's Command takes them.
func (p *process) rlimits() []boxlite.Rlimit {
	var out []boxlite.Rlimit
	for _, r := range p.Rlimits {
		out = append(out, boxlite.Rlimit{Type: r.Type, Soft: r.Soft, Hard: r.Hard})
	}
	return out
}

// user is the process's uid:gid as boxlite's Command.User takes it.
func (p *process) user() string {
	return strconv.FormatUint(uint64(p.User.UID), 10) + ":" + strconv.FormatUint(uint64(p.User.GID), 10)
}

// Box sizing: a box gets its containers' limits plus what the guest kernel
// and agent need.
const (
	defaultContainerMiB = 512 // a container without a memory limit
	guestOverheadMiB    = 128
	maxBoxMiB           = 65536 - guestOverheadMiB // boxlite's MaxMemoryMiB
	mib                 = 1 << 20
)

// boxShape is the memory (MiB) and CPUs of the box for a pod whose
// first container (its sandbox) has spec s. Memory: the pod's limits, as
// the kubelet sums its containers' (CRI's sandbox-memory annotation,
// containerd 1.7 and later), else the container's own limit, else 512 MiB;
// plus 128 MiB for the guest kernel and agent. CPUs: ceil(quota/period) of
// the same sources, else 1; at most 64.
func (s *spec) boxShape() (memMiB, cpus int) {
	var limit, quota int64
	var period uint64
	if s.Linux != nil && s.Linux.Resources != nil {
		r := s.Linux.Resources
		if r.Memory != nil && r.Memory.Limit != nil {
			limit = *r.Memory.Limit
		}
		if r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil {
			quota, period = *r.CPU.Quota, *r.CPU.Period
		}
	}
	if v, err := strconv.ParseInt(s.Annotations[annSandboxMemory], 10, 64); err == nil && v > 0 {
		limit = v
	}
	q, qerr := strconv.ParseInt(s.Annotations[annSandboxCPUQuota], 10, 64)
	p, perr := strconv.ParseUint(s.Annotations[annSandboxCPUPeriod], 10, 64)
	if qerr == nil && perr == nil && q > 0 && p > 0 {
		quota, period = q, p
	}
	memMiB, cpus = defaultContainerMiB, 1
	if limit > 0 {
		memMiB = int(min((limit+mib-1)/mib, maxBoxMiB))
	}
	if quota > 0 && period > 0 {
		cpus = int(min((uint64(quota)+period-1)/period, 64))
	}
	return memMiB + guestOverheadMiB, max(cpus, 1)
}

// memoryLimit is the spec's own memory limit in bytes (0: none).
func (s *spec) memoryLimit() uint64 {
	if s.Linux != nil && s.Linux.Resources != nil && s.Linux.Resources.Memory != nil &&
		s.Linux.Resources.Memory.Limit != nil && *s.Linux.Resources.Memory.Limit > 0 {
		return uint64(*s.Linux.Resources.Memory.Limit)
	}
	return 0
}

// CRI's annotations on a container's spec.
const (
	annContainerType = "io.kubernetes.cri.container-type" // "sandbox" or "container"
	annSandboxID     = "io.kubernetes.cri.sandbox-id"
	// The pod's resources, on the sandbox's spec (containerd 1.7 and later).
	annSandboxMemory    = "io.kubernetes.cri.sandbox-memory"
	annSandboxCPUQuota  = "io.kubernetes.cri.sandbox-cpu-quota"
	annSandboxCPUPeriod = "io.kubernetes.cri.sandbox-cpu-period"
)

// sandboxOf is the pod sandbox a container belongs to: its own id for a
// sandbox or a container outside CRI.
func (s *spec) sandboxOf(id string) (string, error) {
	if s.Annotations[annContainerType] != "container" {
		return id, nil
	}
	sb := s.Annotations[annSandboxID]
	if err := checkID("sandbox", sb); err != nil {
		return "", fmt.Errorf("container %s: %w", id, err)
	}
	return sb, nil
}
