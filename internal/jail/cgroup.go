package jail

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// The controllers the jail uses, in Layers order.
var controllers = []string{"memory", "pids", "cpu"}

// hierarchy is where the leaf group for some controllers is made: a cgroup
// v2 directory (a sibling of the caller's own group, since v2 allows no
// processes in a group with children) or a v1 controller's current group.
type hierarchy struct {
	v2     bool
	parent string   // directory the leaf is created in
	ctrls  []string // controllers of controllers[] this hierarchy serves
	why    string   // why it cannot be used; empty if it can
}

// mountinfo entry for a cgroup file system.
type cgMount struct {
	point, root, fstype string
	opts                []string
}

func readCgMounts() ([]cgMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseCgMounts(string(b)), nil
}

func parseCgMounts(mountinfo string) []cgMount {
	var ms []cgMount
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent maj:min root point opts [tags] - fstype source superopts
		f := strings.Fields(line)
		i := indexOf(f, "-")
		if i < 6 || len(f) < i+4 {
			continue
		}
		fs := f[i+1]
		if fs != "cgroup" && fs != "cgroup2" {
			continue
		}
		ms = append(ms, cgMount{point: unescapeMount(f[4]), root: unescapeMount(f[3]), fstype: fs, opts: strings.Split(f[i+3], ",")})
	}
	return ms
}

func indexOf(f []string, s string) int {
	for i, x := range f {
		if x == s {
			return i
		}
	}
	return -1
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// readProcCgroups maps each v1 controller (and "" for v2) to the process's
// path in that hierarchy.
func readProcCgroups(pid string) (map[string]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		p := strings.SplitN(line, ":", 3)
		if len(p) != 3 {
			continue
		}
		if p[1] == "" {
			m[""] = p[2]
			continue
		}
		for _, c := range strings.Split(p[1], ",") {
			m[c] = p[2]
		}
	}
	return m, nil
}

// hierarchies works out where each controller's leaf group would go.
func hierarchies() ([]hierarchy, error) {
	mounts, err := readCgMounts()
	if err != nil {
		return nil, err
	}
	paths, err := readProcCgroups("self")
	if err != nil {
		return nil, err
	}
	return hierarchiesFrom(mounts, paths), nil
}

// hierarchiesFrom is hierarchies given the cgroup mounts and the process's
// paths (readProcCgroups): a controller attached to a v1 hierarchy uses
// it, else the v2 one if it has the controller.
func hierarchiesFrom(mounts []cgMount, paths map[string]string) []hierarchy {
	var hs []hierarchy
	byParent := map[string]int{}
	add := func(h hierarchy, c string) {
		if i, ok := byParent[h.parent]; ok && h.parent != "" {
			hs[i].ctrls = append(hs[i].ctrls, c)
			return
		}
		h.ctrls = []string{c}
		byParent[h.parent] = len(hs)
		hs = append(hs, h)
	}
	var v2 *cgMount
	for i := range mounts {
		if mounts[i].fstype == "cgroup2" && v2 == nil {
			v2 = &mounts[i]
		}
	}
	var v2ctrls map[string]bool
	var v2parent, v2why string
	if v2 != nil {
		v2parent, v2ctrls, v2why = planV2(v2, paths[""])
	}
	for _, c := range controllers {
		var v1 *cgMount
		for i := range mounts {
			if mounts[i].fstype == "cgroup" && indexOf(mounts[i].opts, c) >= 0 {
				v1 = &mounts[i]
				break
			}
		}
		switch {
		case v1 != nil:
			p, ok := paths[c]
			if !ok {
				add(hierarchy{why: "cgroup v1 " + c + " is mounted but /proc/self/cgroup has no line for it"}, c)
				continue
			}
			dir, ok := under(v1, p)
			if !ok {
				add(hierarchy{why: fmt.Sprintf("our cgroup v1 %s group %s is not under its mount %s", c, p, v1.point)}, c)
				continue
			}
			h := hierarchy{parent: dir}
			if err := unix.Access(dir, unix.W_OK); err != nil {
				h.why = fmt.Sprintf("cgroup v1 %s: %s is not writable (%v)", c, dir, err)
			}
			add(h, c)
		case v2 != nil && v2ctrls[c]:
			h := hierarchy{v2: true, parent: v2parent}
			if v2why != "" {
				h = hierarchy{v2: true, why: v2why}
			}
			add(h, c)
		case v2 != nil:
			why := fmt.Sprintf("cgroup v2: controller %s not available in %s", c, v2parent)
			if v2why != "" {
				why = v2why
			}
			add(hierarchy{v2: true, why: why}, c)
		default:
			add(hierarchy{why: "no cgroup file system mounted"}, c)
		}
	}
	return hs
}

// planV2 picks the v2 directory to create leaves in: the parent of our own
// group (a sibling leaf), or our group itself when it is the root. ctrls are
// the controllers a leaf there gets or can get.
func planV2(m *cgMount, own string) (parent string, ctrls map[string]bool, why string) {
	ownDir, ok := under(m, own)
	if !ok {
		return "", nil, fmt.Sprintf("cgroup v2: our group %s is not under its mount %s", own, m.point)
	}
	parent = ownDir
	if own != "/" && ownDir != m.point {
		parent = filepath.Dir(ownDir)
	}
	ctrls = map[string]bool{}
	avail := readWords(filepath.Join(parent, "cgroup.controllers"))
	enabled := readWords(filepath.Join(parent, "cgroup.subtree_control"))
	for _, c := range controllers {
		if enabled[c] || avail[c] {
			ctrls[c] = true
		}
	}
	if err := unix.Access(parent, unix.W_OK); err != nil {
		return parent, ctrls, fmt.Sprintf("cgroup v2: %s is not writable (%v)", parent, err)
	}
	if err := unix.Access(filepath.Join(parent, "cgroup.procs"), unix.W_OK); err != nil {
		return parent, ctrls, fmt.Sprintf("cgroup v2: %s/cgroup.procs is not writable (%v)", parent, err)
	}
	for c := range ctrls {
		if !enabled[c] && hasProcs(parent) && parent != m.point {
			return parent, ctrls, fmt.Sprintf("cgroup v2: %s is not enabled in %s, which holds processes", c, parent)
		}
	}
	return parent, ctrls, ""
}

func under(m *cgMount, p string) (string, bool) {
	root := strings.TrimSuffix(m.root, "/")
	if root != "" && p != root && !strings.HasPrefix(p, root+"/") {
		return "", false
	}
	return filepath.Join(m.point, strings.TrimPrefix(p, root)), true
}

func readWords(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	m := map[string]bool{}
	for _, w := range strings.Fields(string(b)) {
		m[w] = true
	}
	return m
}

func hasProcs(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// cgroup is one program's set of leaf groups.
type cgroup struct {
	leaves []cgLeaf
}

type cgLeaf struct {
	dir   string
	ctrls []string // the controllers whose limits were set there
}

// createCgroup makes the leaf groups of spec and writes its limits,
// recording each controller's layer in l. A controller the host cannot give
// is reported there; a group of that name that holds processes is an error
// (errdefs.ErrAlreadyExists).
func createCgroup(spec *CgroupSpec, l *Layers) (*cgroup, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, fmt.Errorf("jail: cgroup: %v: %w", err, errdefs.ErrInternal)
	}
	wanted := map[string]bool{"memory": spec.MemoryMaxBytes > 0, "pids": spec.PidsMax > 0, "cpu": spec.CPUWeight > 0}
	cg := &cgroup{}
	for _, h := range hs {
		// A hierarchy none of whose limits is asked for is not joined: a
		// cpu group of its own changes scheduling even at the default
		// weight (the program's threads then share one weight).
		want := false
		for _, c := range h.ctrls {
			if !wanted[c] {
				*layerOf(l, c) = setLimit(h.v2, "", c, spec) // the "is 0" note
			}
			want = want || wanted[c]
		}
		if !want {
			continue
		}
		if h.why != "" {
			for _, c := range h.ctrls {
				layerOf(l, c).Note = h.why
			}
			continue
		}
		dir := filepath.Join(h.parent, spec.Name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if !os.IsExist(err) {
				for _, c := range h.ctrls {
					layerOf(l, c).Note = fmt.Sprintf("mkdir %s: %v", dir, unwrapPathErr(err))
				}
				continue
			}
			if hasProcs(dir) {
				cg.remove()
				return nil, fmt.Errorf("jail: cgroup %s exists and holds processes: %w", dir, errdefs.ErrAlreadyExists)
			}
		}
		lf := cgLeaf{dir: dir}
		if h.v2 {
			enableV2(h.parent, h.ctrls)
		}
		for _, c := range h.ctrls {
			if !wanted[c] {
				continue
			}
			ly := layerOf(l, c)
			if *ly = setLimit(h.v2, dir, c, spec); ly.Applied {
				lf.ctrls = append(lf.ctrls, c)
			}
		}
		cg.leaves = append(cg.leaves, lf)
	}
	if len(cg.leaves) == 0 {
		return nil, nil
	}
	return cg, nil
}

func layerOf(l *Layers, c string) *Layer {
	switch c {
	case "memory":
		return &l.Memory
	case "pids":
		return &l.Pids
	default:
		return &l.CPU
	}
}

// enableV2 turns on the controllers for parent's children; errors show up
// as missing files when the limits are written.
func enableV2(parent string, ctrls []string) {
	enabled := readWords(filepath.Join(parent, "cgroup.subtree_control"))
	var add []string
	for _, c := range ctrls {
		if !enabled[c] {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0)
	}
}

// setLimit writes controller c's limit in leaf.
func setLimit(v2 bool, leaf, c string, spec *CgroupSpec) Layer {
	type kv struct {
		file, val string
		optional  bool
	}
	var files []kv
	switch c {
	case "memory":
		if spec.MemoryMaxBytes == 0 {
			return Layer{Note: "Spec.Cgroup.MemoryMaxBytes is 0"}
		}
		v := strconv.FormatInt(spec.MemoryMaxBytes, 10)
		if v2 {
			files = []kv{{"memory.max", v, false}, {"memory.swap.max", "0", true}, {"memory.oom.group", "1", true}}
		} else {
			files = []kv{{"memory.limit_in_bytes", v, false}, {"memory.memsw.limit_in_bytes", v, true}}
		}
	case "pids":
		if spec.PidsMax == 0 {
			return Layer{Note: "Spec.Cgroup.PidsMax is 0"}
		}
		files = []kv{{"pids.max", strconv.FormatInt(spec.PidsMax, 10), false}}
	case "cpu":
		if spec.CPUWeight == 0 {
			return Layer{Note: "Spec.Cgroup.CPUWeight is 0"}
		}
		if v2 {
			files = []kv{{"cpu.weight", strconv.FormatUint(spec.CPUWeight, 10), false}}
		} else {
			files = []kv{{"cpu.shares", strconv.FormatUint(max(2, spec.CPUWeight*1024/100), 10), false}}
		}
	}
	var set []string
	for _, f := range files {
		p := filepath.Join(leaf, f.file)
		if f.optional {
			if _, err := os.Stat(p); err != nil {
				continue
			}
		}
		if err := os.WriteFile(p, []byte(f.val), 0); err != nil {
			if f.optional {
				continue
			}
			return Layer{Note: fmt.Sprintf("write %s: %v", p, unwrapPathErr(err))}
		}
		set = append(set, f.file+"="+f.val)
	}
	v := "v1"
	if v2 {
		v = "v2"
	}
	return Layer{Applied: true, Note: fmt.Sprintf("cgroup %s %s: %s", v, leaf, strings.Join(set, " "))}
}

// add moves pid into every leaf. A leaf that refuses makes its controllers'
// layers missing; it is not fatal.
func (cg *cgroup) add(pid int, l *Layers) error {
	for _, lf := range cg.leaves {
		if err := os.WriteFile(filepath.Join(lf.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			for _, c := range lf.ctrls {
				*layerOf(l, c) = Layer{Note: fmt.Sprintf("join %s: %v", lf.dir, unwrapPathErr(err))}
			}
		}
	}
	return nil
}

// remove kills what is left in the leaves and removes them, retrying while
// the kernel still holds them busy.
func (cg *cgroup) remove() error {
	var errs []error
	for _, lf := range cg.leaves {
		if err := removeLeaf(lf.dir); err != nil {
			errs = append(errs, err)
		}
	}
	cg.leaves = nil
	return errors.Join(errs...)
}

func removeLeaf(leaf string) error {
	deadline := time.Now().Add(3 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := unix.Rmdir(leaf)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return fmt.Errorf("jail: remove cgroup %s: %v: %w", leaf, err, errdefs.ErrInternal)
		}
		killLeaf(leaf)
		time.Sleep(delay)
	}
}

// killLeaf sends SIGKILL to every process in leaf, through a pidfd taken
// while the pid is still listed there, so a reused pid is never hit.
func killLeaf(leaf string) {
	procs := filepath.Join(leaf, "cgroup.procs")
	if os.WriteFile(filepath.Join(leaf, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, pid := range readPids(procs) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		for _, p := range readPids(procs) {
			if p == pid {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				break
			}
		}
		unix.Close(fd)
	}
}

func readPids(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// Sweep removes the empty cgroups whose names start with prefix from the
// places this process would create them: what a crashed caller left. Groups
// that still hold processes are left alone. It returns the groups removed.
func Sweep(prefix string) ([]string, error) {
	if prefix == "" {
		return nil, fmt.Errorf("jail: Sweep: empty prefix: %w", errdefs.ErrInvalidArgument)
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, fmt.Errorf("jail: Sweep: %v: %w", err, errdefs.ErrInternal)
	}
	var removed []string
	var errs []error
	for _, h := range hs {
		if h.why != "" {
			continue
		}
		ents, err := os.ReadDir(h.parent)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			p := filepath.Join(h.parent, e.Name())
			if hasProcs(p) {
				continue
			}
			switch err := unix.Rmdir(p); err {
			case nil:
				removed = append(removed, p)
			case unix.EBUSY, unix.ENOENT:
			default:
				errs = append(errs, fmt.Errorf("rmdir %s: %v", p, err))
			}
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("jail: Sweep: %w: %w", errors.Join(errs...), errdefs.ErrInternal)
	}
	return removed, nil
}
