package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseCgMounts(t *testing.T) {
	mi := `25 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
35 31 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
36 31 0:31 / /sys/fs/cgroup/my\040dir rw - cgroup cgroup rw,memory
40 30 0:40 / /proc rw - proc proc rw`
	ms := parseCgMounts(mi)
	if len(ms) != 3 {
		t.Fatalf("%d mounts, want 3: %+v", len(ms), ms)
	}
	if ms[0].fstype != "cgroup2" || ms[0].point != "/sys/fs/cgroup" || ms[0].root != "/" {
		t.Errorf("v2 mount: %+v", ms[0])
	}
	if ms[1].root != "/docker/abc" || !slices.Contains(ms[1].opts, "cpu") || ms[2].point != "/sys/fs/cgroup/my dir" {
		t.Errorf("v1 mounts: %+v %+v", ms[1], ms[2])
	}
}

// A pure cgroup v2 host: the leaf goes next to our own group, whose parent
// already delegates the controllers.
func TestHierarchiesV2Sibling(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"user.slice/cgroup.controllers":           "cpuset cpu io memory pids",
		"user.slice/cgroup.subtree_control":       "cpu memory pids",
		"user.slice/cgroup.procs":                 "",
		"user.slice/app.scope/cgroup.procs":       "123\n",
		"user.slice/app.scope/cgroup.controllers": "cpu memory pids",
	})
	hs := hierarchiesFrom([]cgMount{{point: root, root: "/", fstype: "cgroup2"}}, map[string]string{"": "/user.slice/app.scope"})
	if len(hs) != 1 {
		t.Fatalf("%d hierarchies, want 1: %+v", len(hs), hs)
	}
	h := hs[0]
	if !h.v2 || h.why != "" || h.parent != filepath.Join(root, "user.slice") || !slices.Equal(h.ctrls, controllers) {
		t.Errorf("got %+v, want v2 leaf in %s/user.slice for %v", h, root, controllers)
	}
}

// The parent holds processes and has not enabled the controllers: cgroup
// v2's no-internal-processes rule forbids enabling them, which is reported.
func TestHierarchiesV2InternalProcesses(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a/cgroup.controllers":     "memory pids",
		"a/cgroup.subtree_control": "",
		"a/cgroup.procs":           "77\n",
	})
	hs := hierarchiesFrom([]cgMount{{point: root, root: "/", fstype: "cgroup2"}}, map[string]string{"": "/a/b"})
	for _, h := range hs {
		switch {
		case slices.Contains(h.ctrls, "cpu"):
			if !strings.Contains(h.why, "not available") && !strings.Contains(h.why, "holds processes") {
				t.Errorf("cpu: %+v, want it reported missing", h)
			}
		case !strings.Contains(h.why, "holds processes"):
			t.Errorf("%v: %+v, want the no-internal-processes reason", h.ctrls, h)
		}
	}
}

// At the root of the hierarchy (our group is "/"), the leaf goes in the
// root itself; the root may hold processes.
func TestHierarchiesV2Root(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":     "cpu memory pids",
		"cgroup.subtree_control": "cpu memory pids",
		"cgroup.procs":           "1\n",
	})
	hs := hierarchiesFrom([]cgMount{{point: root, root: "/", fstype: "cgroup2"}}, map[string]string{"": "/"})
	if len(hs) != 1 || hs[0].why != "" || hs[0].parent != root {
		t.Errorf("got %+v, want one v2 leaf in the root %s", hs, root)
	}
}

// cgroup v1 in a container: the mount's root is the container's group, and
// cpu is co-mounted with cpuacct; pids is not mounted at all, and the v2
// mount of a hybrid host has no controllers.
func TestHierarchiesV1Container(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"memory/x/cgroup.procs": "", "cpu,cpuacct/x/cgroup.procs": "",
		"unified/cgroup.controllers": "", "unified/cgroup.subtree_control": "",
	})
	mounts := []cgMount{
		{point: filepath.Join(root, "unified"), root: "/", fstype: "cgroup2"},
		{point: filepath.Join(root, "memory"), root: "/docker/abc", fstype: "cgroup", opts: []string{"rw", "memory"}},
		{point: filepath.Join(root, "cpu,cpuacct"), root: "/docker/abc", fstype: "cgroup", opts: []string{"rw", "cpu", "cpuacct"}},
	}
	paths := map[string]string{"": "/", "memory": "/docker/abc/x", "cpu": "/docker/abc/x", "cpuacct": "/docker/abc/x"}
	got := map[string]hierarchy{}
	for _, h := range hierarchiesFrom(mounts, paths) {
		for _, c := range h.ctrls {
			got[c] = h
		}
	}
	if h := got["memory"]; h.v2 || h.why != "" || h.parent != filepath.Join(root, "memory/x") {
		t.Errorf("memory: %+v", h)
	}
	if h := got["cpu"]; h.v2 || h.why != "" || h.parent != filepath.Join(root, "cpu,cpuacct/x") {
		t.Errorf("cpu: %+v", h)
	}
	if h := got["pids"]; h.why == "" {
		t.Errorf("pids: %+v, want it reported missing", h)
	}
	// A group outside the mount's root cannot be reached.
	paths["memory"] = "/elsewhere"
	for _, h := range hierarchiesFrom(mounts, paths) {
		if slices.Contains(h.ctrls, "memory") && !strings.Contains(h.why, "not under its mount") {
			t.Errorf("memory outside the mount root: %+v", h)
		}
	}
}

func TestSetLimit(t *testing.T) {
	spec := &CgroupSpec{Name: "x", MemoryMaxBytes: 1 << 30, PidsMax: 100, CPUWeight: 50}
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{"memory.max": "max", "memory.swap.max": "max", "memory.oom.group": "0", "pids.max": "max", "cpu.weight": "100"})
	for _, c := range controllers {
		if l := setLimit(true, v2, c, spec); !l.Applied {
			t.Errorf("v2 %s: %+v", c, l)
		}
	}
	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{"memory.limit_in_bytes": "", "pids.max": "", "cpu.shares": ""})
	for _, c := range controllers {
		if l := setLimit(false, v1, c, spec); !l.Applied {
			t.Errorf("v1 %s: %+v", c, l)
		}
	}
	for dir, want := range map[string]map[string]string{
		v2: {"memory.max": "1073741824", "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "100", "cpu.weight": "50"},
		v1: {"memory.limit_in_bytes": "1073741824", "pids.max": "100", "cpu.shares": "512"},
	} {
		for f, v := range want {
			if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != v {
				t.Errorf("%s = %q, want %q", f, b, v)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(v1, "memory.memsw.limit_in_bytes")); err == nil {
		t.Errorf("setLimit created memory.memsw.limit_in_bytes, which the host lacks")
	}
	if l := setLimit(true, v2, "memory", &CgroupSpec{}); l.Applied {
		t.Errorf("a zero limit is not applied: %+v", l)
	}
}
