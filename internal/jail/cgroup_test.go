package jail_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/jail"
)

// TestForkBomb: pids.max stops a program that forks without end.
func TestForkBomb(t *testing.T) {
	requireRoot(t)
	if !jail.Probe().Pids.Applied {
		t.Fatalf("this host has no pids cgroup the jail can use: %s", jail.Probe().Pids.Note)
	}
	uid := testUID(t)
	exe, _ := os.Executable()
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	c := startJailed(t, jail.Spec{
		Path: probePath, Args: []string{probePath, "forkbomb"},
		UID: uid, GID: uid,
		Binds:   []jail.Bind{{Host: exe, Inside: probePath}},
		Devices: []string{"/dev/null"}, // os/exec gives children /dev/null as stdin
		Cgroup:  &jail.CgroupSpec{Name: testCgroupPrefix + "forkbomb-" + strconv.Itoa(int(uid)), PidsMax: 24},
		Stdout:  pw, Stderr: os.Stderr,
	}, pw)
	line := readLine(t, pr, 60*time.Second)
	t.Logf("fork bomb: %s", strings.TrimSpace(line))
	var n int
	fmt.Sscanf(line, "started %d:", &n)
	if n >= 24 || !strings.Contains(line, "resource temporarily unavailable") {
		t.Errorf("fork bomb was not stopped by pids.max=24: %q", line)
	}
	// Wait removes the group, killing the sleeping children left in it.
	if err := waitTimeout(t, c, 20*time.Second); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

// TestSweep: leftover empty groups go, a busy one stays.
func TestSweep(t *testing.T) {
	requireRoot(t)
	uid := testUID(t)
	exe, _ := os.Executable()
	prefix := testCgroupPrefix + "sweep-"
	busy := jail.Spec{Path: probePath, Args: []string{probePath, "sleep"}, UID: uid, GID: uid,
		Binds: []jail.Bind{{Host: exe, Inside: probePath}}, Cgroup: &jail.CgroupSpec{Name: prefix + "busy", PidsMax: 32, MemoryMaxBytes: 64 << 20}}
	c, _ := jail.Command("", busy)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process().Pid
	// No CPUWeight was asked for: the program stays in our cpu group.
	if got, ours := cgroupFile(t, pid, "cpu", "x"), cgroupFile(t, os.Getpid(), "cpu", "x"); got != ours {
		t.Errorf("without a CPUWeight the program moved to cpu group %s (ours: %s)", filepath.Dir(got), filepath.Dir(ours))
	}
	var leftovers []string
	for _, ctrl := range []string{"memory", "pids"} {
		d := filepath.Join(filepath.Dir(filepath.Dir(cgroupFile(t, pid, ctrl, "x"))), prefix+"crashed")
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		leftovers = append(leftovers, d)
	}
	removed, err := jail.Sweep(prefix)
	if err != nil {
		t.Error(err)
	}
	t.Logf("removed %v", removed)
	for _, d := range leftovers {
		if fileExists(d) || !slices.Contains(removed, d) {
			t.Errorf("Sweep left %s", d)
		}
	}
	if !fileExists(filepath.Dir(cgroupFile(t, pid, "pids", "x"))) {
		t.Errorf("Sweep removed the busy group")
	}
	c.Process().Kill()
	if err := waitTimeout(t, c, 10*time.Second); err == nil {
		t.Errorf("Wait after Kill: nil, want the kill")
	}

	// A start with the name of an empty leftover reuses it, and Wait
	// removes it.
	busy.Path, busy.Args = "/bin/true", []string{"true"}
	busy.Cgroup.Name = prefix + "again"
	for _, d := range leftovers {
		d = filepath.Join(filepath.Dir(d), busy.Cgroup.Name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if fileExists(d) {
				t.Errorf("%s left after Wait", d)
				os.Remove(d)
			}
		}()
	}
	c, _ = jail.Command("", busy)
	if err := c.Start(); err != nil {
		t.Fatalf("Start over an empty leftover group: %v", err)
	}
	if l := c.Layers(); !l.Memory.Applied || !l.Pids.Applied {
		t.Errorf("limits not applied on the reused group: %+v %+v", l.Memory, l.Pids)
	}
	if err := waitTimeout(t, c, 10*time.Second); err != nil {
		t.Errorf("Wait: %v", err)
	}
}
