package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Two processes starting one stopped box at once get one VM: the second
// joins the box the first started.
func TestTwoProcessesStartOneBox(t *testing.T) {
	if name := os.Getenv("BOXLITE_TEST_STARTER"); name != "" {
		starter(name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithName("twostart"), boxlite.WithAutoRemove(false))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		line  chan string
	}
	var kids []child
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcessesStartOneBox$")
		cmd.Env = append(os.Environ(), "BOXLITE_TEST_STARTER=twostart")
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		k := child{cmd, in, make(chan string, 1)}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "STARTED ") || strings.HasPrefix(sc.Text(), "FAILED ") {
					k.line <- sc.Text()
				}
			}
			close(k.line)
		}()
		kids = append(kids, k)
	}
	defer func() {
		for _, k := range kids {
			k.stdin.Close()
			k.cmd.Wait()
		}
	}()
	var lines []string
	for _, k := range kids {
		select {
		case l := <-k.line:
			lines = append(lines, l)
		case <-ctx.Done():
			t.Fatal("a starter did not report")
		}
	}
	if len(lines) != 2 || lines[0] != lines[1] || !strings.HasPrefix(lines[0], "STARTED ") {
		t.Fatalf("the two starts: %q; want the same VMM twice", lines)
	}
}

// starter runs in a child process: it starts a box by name, runs a command
// in it, reports the VMM and waits for its stdin to close.
func starter(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := rt.Get(ctx, name)
	if err == nil {
		err = b.Start(ctx)
	}
	var res *boxlite.ExecResult
	if err == nil {
		res, err = b.Run(ctx, sh("echo ok"))
	}
	if err != nil || string(res.Stdout) != "ok\n" {
		fmt.Printf("FAILED %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("STARTED vmm %d\n", b.Info().Runtime.VMMPid)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// A process killed at random points of creating a box (loading and
// converting its image, registering it, making its disk, booting) leaves no
// shim, VMM, VMM cgroup or socket behind, and the next runtime on the home
// cleans up the rest.
func TestKilledCreatorLeavesNothing(t *testing.T) {
	if os.Getenv("BOXLITE_TEST_DOOMED") != "" {
		doomed()
		return
	}
	cycles := 5 // make soak runs more (BOXLITE_SOAK_CYCLES)
	if v := os.Getenv("BOXLITE_SOAK_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BOXLITE_SOAK_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	for i := 0; i < cycles; i++ {
		home := t.TempDir()
		delay := time.Duration(rand.Intn(3000)) * time.Millisecond
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledCreatorLeavesNothing$")
		cmd.Env = append(os.Environ(), "BOXLITE_TEST_DOOMED=1", "BOXLITE_TEST_HOME="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(20 * time.Second)
		for {
			left := leftovers(home)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed after %v: left behind %q", delay, left)
			}
			time.Sleep(100 * time.Millisecond)
		}
		r, err := boxlite.NewRuntime(boxlite.WithHome(home))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		infos, err := r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, bi := range infos {
			// At rest: configured when the kill came between Create and the
			// start making its disk, stopped after.
			if bi.State != boxlite.StateStopped && bi.State != boxlite.StateConfigured {
				t.Errorf("killed after %v: box %s is %s", delay, bi.ID, bi.State)
			}
			if err := r.Remove(ctx, bi.ID, true); err != nil {
				t.Error(err)
			}
		}
		if _, err := r.PruneImages(ctx, true); err != nil {
			t.Error(err)
		}
		r.Close()
		if tmp, _ := os.ReadDir(filepath.Join(home, "images", "tmp")); len(tmp) > 0 {
			t.Errorf("killed after %v: images/tmp keeps %d entries after prune", delay, len(tmp))
		}
		t.Logf("killed after %v: %d box(es) left at rest, removed", delay, len(infos))
	}
}

func doomed() {
	ctx := context.Background()
	r, err := boxlite.NewRuntime(boxlite.WithHome(os.Getenv("BOXLITE_TEST_HOME")))
	if err == nil {
		_, err = r.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE"))
	}
	if err == nil {
		_, err = boxtest.CreateStarted(ctx, r, "alpine:latest")
	}
	if err != nil {
		fmt.Println(err)
	}
	time.Sleep(time.Minute)
}

// leftovers lists what still runs or exists for the boxes of home: shims
// (by their config path), VMM cgroups, and sockets.
func leftovers(home string) []string {
	var left []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), home) {
			left = append(left, "process "+p.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	boxes, _ := os.ReadDir(filepath.Join(home, "boxes"))
	for _, d := range boxes {
		for _, f := range []string{"shim.sock"} {
			if _, err := os.Stat(filepath.Join(home, "boxes", d.Name(), f)); err == nil {
				left = append(left, "socket of box "+d.Name())
			}
		}
		cg, _ := filepath.Glob("/sys/fs/cgroup/*/*/boxlite-" + d.Name())
		cg2, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/boxlite-" + d.Name())
		cg3, _ := filepath.Glob("/sys/fs/cgroup/*/boxlite-" + d.Name())
		for _, c := range append(append(cg, cg2...), cg3...) {
			left = append(left, "cgroup "+c)
		}
	}
	return left
}

// A box whose shim is killed is stopped, and every later call says so with
// the box-stopped kind (never a broken pipe) instead of rebooting it; Start
// boots it again; removing it leaves no VMM cgroup behind.
func TestShimKilledMeansStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithAutoRemove(false))
	if err != nil {
		t.Fatal(err)
	}
	// A long exec in flight when the shim dies, and execs after; make soak
	// kills it 20 times, starting the box again each time.
	kills := 1
	if os.Getenv("BOXLITE_SOAK_CYCLES") != "" {
		kills = 20
	}
	var info *boxlite.BoxRuntimeInfo
	for k := 0; k < kills; k++ {
		if k > 0 {
			if err := b.Start(ctx); err != nil {
				t.Fatalf("start %d after the shim was killed: %v", k, err)
			}
		}
		info = b.Info().Runtime
		ex, err := b.Exec(ctx, sh("sleep 100"))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(info.ShimPid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, err := ex.Wait(ctx); !errors.Is(err, errdefs.ErrInvalidState) {
			t.Errorf("kill %d: exec in flight: %v; want the box-stopped kind", k, err)
		}
		for i := 0; i < 5; i++ {
			if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "is stopped") {
				t.Fatalf("kill %d: exec %d after the shim was killed: %v; want the box-stopped kind", k, i, err)
			}
		}
		waitGone(t, "VMM", info.VMMPid)
	}
	// Recovery: another runtime of the home sees it stopped (the killed
	// shim's socket is stale), and an explicit Start boots it again past that
	// socket and the lock the dead shim held.
	other, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ob, err := other.Get(ctx, b.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s := ob.State(); s != boxlite.StateStopped {
		t.Fatalf("another runtime sees the box of the killed shim as %s; want stopped", s)
	}
	if _, err := os.Stat(filepath.Join(b.Info().Dir, "shim.sock")); err != nil {
		t.Logf("no stale socket to recover from: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatalf("start after the shim was killed: %v", err)
	}
	runIn(t, b, sh("true"))
	before, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/boxlite-" + b.ID())
	t.Logf("VMM cgroups the killed shim left: %q", before)
	if err := b.Remove(ctx, true); err != nil {
		t.Fatal(err)
	}
	cg, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/boxlite-" + b.ID())
	cg2, _ := filepath.Glob("/sys/fs/cgroup/*/boxlite-" + b.ID())
	if len(cg)+len(cg2) > 0 {
		t.Errorf("VMM cgroups left after remove: %q", append(cg, cg2...))
	}
}
