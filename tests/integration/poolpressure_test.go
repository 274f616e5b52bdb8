package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

// TestWarmPoolShrinksUnderRealPressure makes real memory pressure without
// starving the host: a shell in a memory cgroup of its own, limited to
// 16 MiB, reads a 64 MB file again and again, so its page cache is
// reclaimed at every read (the kernel counts the reclaim as memory stall
// in /proc/pressure/memory). The runtime's PSI trigger must fire and its
// pool of two give boxes back; once the shell ends and 30 s pass quiet,
// the pool refills. Not parallel: the pressure is the host's, and every
// runtime with a pool (TestWarmPool's) gives boxes back at it.
func TestWarmPoolShrinksUnderRealPressure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cg := memoryCgroup(t, 16<<20)
	prt := filledPool(ctx, t, t.TempDir(), 2, boxlite.WithMemoryMiB(128))
	ready := func() int { return prt.WarmPools()[0].Ready }

	file := filepath.Join(t.TempDir(), "cache")
	script := fmt.Sprintf(`echo $$ > %s && head -c 64000000 /dev/urandom > %s && while :; do cat %s > /dev/null; done`, cg.procs, file, file)
	tctx, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	thrash := exec.CommandContext(tctx, "sh", "-c", script)
	thrash.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	thrash.Stderr = os.Stderr
	if err := thrash.Start(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for ready() == 2 && tctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	thrash.Wait()
	if n := ready(); n >= 2 {
		t.Fatalf("no pool box given back in %v of reclaim in a 16 MiB cgroup (failcnt or events: %s; %s)", time.Since(t0).Round(time.Second), cg.failcnt(), pressureLine())
	}
	t.Logf("pool shrank to %d after %v of pressure", ready(), time.Since(t0).Round(time.Millisecond))

	t1 := time.Now()
	for ready() < 2 && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	if n := ready(); n != 2 {
		t.Fatalf("pool did not refill after the pressure: %d ready", n)
	}
	if d := time.Since(t1); d < 25*time.Second {
		t.Errorf("pool refilled %v after the pressure ended, before its quiet period (30 s)", d)
	}
}

// cgroup is a memory cgroup made for a test.
type cgroup struct{ dir, procs, failFile string }

func (c cgroup) failcnt() string {
	b, _ := os.ReadFile(c.failFile)
	return strings.TrimSpace(string(b))
}

// memoryCgroup makes a child of this process's memory cgroup (v1, or v2
// with the memory controller delegated) limited to limit bytes, removed
// at the end of the test. Where the host has none that this process may
// make, the test fails with what is missing.
func memoryCgroup(t *testing.T, limit int64) cgroup {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "" && parts[0] == "0":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	name := fmt.Sprintf("boxlite-pressure-%d", os.Getpid())
	var c cgroup
	var limitFile string
	switch {
	case v1 != "":
		c.dir = filepath.Join("/sys/fs/cgroup/memory", v1, name)
		limitFile, c.failFile = "memory.limit_in_bytes", "memory.failcnt"
	case v2 != "":
		c.dir = filepath.Join("/sys/fs/cgroup", v2, name)
		limitFile, c.failFile = "memory.max", "memory.events"
	default:
		t.Fatal("no memory cgroup in /proc/self/cgroup")
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		t.Fatalf("a memory cgroup for the pressure (needs a writable memory cgroup, as the VMM's jail does): %v", err)
	}
	t.Cleanup(func() {
		// Its one process has ended; the kernel may take a moment to
		// let go of the cgroup.
		for i := 0; i < 50 && os.Remove(c.dir) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(c.dir, limitFile), []byte(fmt.Sprint(limit)), 0); err != nil {
		t.Fatalf("memory cgroup %s: limit: %v", c.dir, err)
	}
	c.procs = filepath.Join(c.dir, "cgroup.procs")
	return c
}

func pressureLine() string {
	b, _ := os.ReadFile("/proc/pressure/memory")
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}
