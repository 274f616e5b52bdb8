package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
	"github.com/boxlite/boxlite/tests/internal/proc"
)

func TestStreamsAndExitCode(t *testing.T) {
	res := runIn(t, shared, sh("echo out; echo err >&2; exit 3"))
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.Code != 3 {
		t.Fatalf("got stdout %q stderr %q code %d", res.Stdout, res.Stderr, res.Code)
	}
}

func TestGuestKernel(t *testing.T) {
	res := runIn(t, shared, boxlite.Command{Argv: []string{"uname", "-r"}})
	var host syscall.Utsname
	syscall.Uname(&host)
	guest := strings.TrimSpace(string(res.Stdout))
	// The kernel the assets hold (make's GUEST_KERNEL), not the host's.
	kdir := os.Getenv("BOXLITE_GUEST_KERNEL")
	if kdir == "" {
		t.Fatal("BOXLITE_GUEST_KERNEL is not set (make test-go sets it)")
	}
	want, err := os.ReadFile(filepath.Join(kdir, "kernel.version"))
	if err != nil {
		t.Fatal(err)
	}
	if guest != strings.TrimSpace(string(want)) || guest == utsString(host.Release[:]) {
		t.Fatalf("guest kernel %q, want %q (host %q)", guest, bytes.TrimSpace(want), utsString(host.Release[:]))
	}
	info := shared.Info()
	if info.Runtime == nil || info.Runtime.Accel == "" || info.Runtime.AccelReason == "" || !strings.Contains(info.Runtime.Kernel, guest) {
		t.Fatalf("info: %+v", info.Runtime)
	}
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// 100 execs at once in one box: each gets its own output and exit code.
func TestConcurrentExecs(t *testing.T) {
	const lines = 100
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := shared.Run(context.Background(), sh(fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo %d-$i; echo e%d-$i >&2; i=$((i+1)); done; exit %d", lines, i, i, i%256)))
			if err != nil {
				t.Errorf("exec %d: %v", i, err)
				return
			}
			var wantOut, wantErr strings.Builder
			for j := range lines {
				fmt.Fprintf(&wantOut, "%d-%d\n", i, j)
				fmt.Fprintf(&wantErr, "e%d-%d\n", i, j)
			}
			if string(res.Stdout) != wantOut.String() || string(res.Stderr) != wantErr.String() || res.Code != i%256 {
				t.Errorf("exec %d: mixed or wrong output (code %d, %d/%d bytes)", i, res.Code, len(res.Stdout), len(res.Stderr))
			}
		}()
	}
	wg.Wait()
}

func TestTimeoutKillsAndBoxStaysUsable(t *testing.T) {
	// The trap makes TERM useless, so the guest must escalate to KILL after
	// the grace period: well before this deadline, which the sleep outlasts.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	res, err := shared.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "trap '' TERM; echo started; sleep 60"},
		Timeout: time.Second, Grace: 500 * time.Millisecond})
	if !errors.Is(err, errdefs.ErrTimeout) || !res.TimedOut {
		t.Fatalf("want timeout, got %v (%+v)", err, res)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("output before the timeout was lost: %q", res.Stdout)
	}
	if res := runIn(t, shared, sh("echo alive")); string(res.Stdout) != "alive\n" {
		t.Fatalf("box unusable after timeout: %q", res.Stdout)
	}
}

func TestStdinAndLargeOutput(t *testing.T) {
	e, err := shared.Exec(context.Background(), boxlite.Command{Argv: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB, well over the window
	go func() { e.Stdin.Write(in); e.Stdin.Close() }()
	res, err := e.Collect(context.Background())
	if err != nil || !bytes.Equal(res.Stdout, in) {
		t.Fatalf("cat returned %d of %d bytes, err %v", len(res.Stdout), len(in), err)
	}
	res = runIn(t, shared, sh("head -c 20000000 /dev/zero"))
	if len(res.Stdout) != 20000000 {
		t.Fatalf("large output: %d bytes", len(res.Stdout))
	}
}

func TestBackpressure(t *testing.T) {
	// Nobody reads stdout: the process must block once the window is full,
	// not buffer without bound; reading later gets everything.
	e, err := shared.Exec(context.Background(), sh("head -c 8000000 /dev/zero; echo done >&2"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Done():
		t.Fatal("process finished while its output was not being read")
	case <-time.After(2 * time.Second):
	}
	n, _ := io.Copy(io.Discard, e.Stdout)
	errOut, _ := io.ReadAll(e.Stderr)
	if st, err := e.Wait(context.Background()); err != nil || st.Code != 0 || n != 8000000 || string(errOut) != "done\n" {
		t.Fatalf("got %d bytes, stderr %q, %+v %v", n, errOut, st, err)
	}
}

func TestEnvCwdUser(t *testing.T) {
	res := runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", `echo "$GREETING"; pwd; id -u`},
		Env: map[string]string{"GREETING": "hi there"}, Cwd: "/tmp", User: "1000"})
	if got := string(res.Stdout); got != "hi there\n/tmp\n1000\n" {
		t.Fatalf("got %q (stderr %q)", got, res.Stderr)
	}
}

func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"no-such-command"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing command: %v", err)
	}
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{""}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("empty command: %v", err)
	}
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"true"}, Cwd: "/no/such/dir"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("bad cwd: %v", err)
	}
	if _, err := shared.Run(ctx, boxlite.Command{Argv: []string{"true"}, User: "nosuchuser"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("bad user: %v", err)
	}
	// A loopback registry that is not there (tests never reach out): its
	// own kind, not not-found.
	if _, err := boxtest.CreateStarted(ctx, rt, "127.0.0.1:9/no-such-image:latest"); !errors.Is(err, errdefs.ErrUnreachable) {
		t.Errorf("missing image, no registry: %v", err)
	}
	if _, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(1)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad memory: %v", err)
	}
	if _, err := rt.Get(ctx, "no-such-box"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing box: %v", err)
	}
	// Still fine after all that.
	if res := runIn(t, shared, sh("echo ok")); string(res.Stdout) != "ok\n" {
		t.Fatalf("got %q", res.Stdout)
	}
	// A box that could never fit in the host is refused before anything
	// starts (boxes may ask for up to 64 GiB: a host with more cannot be
	// made to refuse one, and says so).
	if total := hostMemMiB(t); total < 64<<10 {
		shims := len(proc.ChildrenNamed(os.Getpid(), "boxlite-shim"))
		if _, err := boxtest.CreateStarted(context.Background(), rt, "alpine:latest", boxlite.WithMemoryMiB(64<<10)); !errors.Is(err, errdefs.ErrLimit) {
			t.Errorf("a 64 GiB box on a %d MiB host: %v; want ErrLimit", total, err)
		} else if n := len(proc.ChildrenNamed(os.Getpid(), "boxlite-shim")); n > shims {
			t.Errorf("refusing a 64 GiB box started a shim (%d shims, %d before): it must not boot", n, shims)
		}
	} else {
		t.Logf("this host has %d MiB: a 64 GiB box fits, so the refusal is not checked here", total)
	}
}

// shimsLogged counts the shims that have logged in a box directory (each
// prefixes its lines with its pid).
func shimsLogged(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "shim.log"))
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "shim["); ok {
			pid, _, _ := strings.Cut(rest, "]")
			pids[pid] = true
		}
	}
	return len(pids)
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
	}
}

// One more box, through BoxLite's lifecycle: created configured (not
// booted), started, stopped; an exec on the stopped box starts it again
// with its disk as it was; then its VMM is killed, and the next call says
// so instead of rebooting it; rm leaves nothing behind. Two boots.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	b, err := rt.Create(ctx, "alpine:latest", boxlite.WithName("lifecycle"), boxlite.WithAutoRemove(false), boxlite.WithEntrypoint("echo", "entry"), boxlite.WithCmd("and", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	if bi := b.Info(); bi.State != boxlite.StateConfigured || bi.Runtime != nil {
		t.Fatalf("created box: state %s, runtime %+v; want configured with no runtime", bi.State, bi.Runtime)
	}
	if err := b.Stop(ctx); err != nil || b.State() != boxlite.StateConfigured {
		t.Fatalf("stop of a configured box: %v, state %s; want a no-op", err, b.State())
	}
	infos, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bi := range infos {
		if bi.ID == b.ID() && bi.State != boxlite.StateConfigured {
			t.Errorf("list shows the created box %s", bi.State)
		}
	}
	// An auto-remove box goes when it stops, not when it is merely configured.
	auto, err := rt.Create(ctx, "alpine:latest", boxlite.WithAutoRemove(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.Stop(ctx); err != nil || auto.State() != boxlite.StateConfigured {
		t.Fatalf("stop of a configured auto-remove box: %v, state %s", err, auto.State())
	}
	if err := auto.Remove(ctx, false); err != nil {
		t.Fatalf("remove of a configured box: %v", err)
	}
	// Execs at once on the configured box start it, once.
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { _, err := b.Run(ctx, sh("true")); errs <- err }()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("exec on the configured box: %v", err)
		}
	}
	if shims := shimsLogged(t, b.Info().Dir); shims != 1 {
		t.Errorf("three execs at once on a configured box ran %d shims, want 1", shims)
	}
	if err := b.Start(ctx); err != nil || b.State() != boxlite.StateRunning {
		t.Fatalf("start of a running box: %v, state %s; want a no-op", err, b.State())
	}
	// No command: the box's entrypoint and cmd (they override the image's /bin/sh).
	if res := runIn(t, b, boxlite.Command{}); string(res.Stdout) != "entry and cmd\n" {
		t.Errorf("bare exec ran %q, want the box's entrypoint and cmd", res.Stdout)
	}
	runIn(t, b, sh("echo kept > /root/note && sync"))
	shim1 := b.Info().Runtime.ShimPid
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := b.State(); s != boxlite.StateStopped {
		t.Fatalf("after stop: %s", s)
	}
	if res := runIn(t, b, sh("cat /root/note")); string(res.Stdout) != "kept\n" {
		t.Fatalf("exec on the stopped box: disk lost across stop and start: %q %q", res.Stdout, res.Stderr)
	}
	if bi := b.Info(); bi.State != boxlite.StateRunning || bi.Runtime == nil || bi.Runtime.ShimPid == shim1 {
		t.Fatalf("exec on the stopped box did not start it again: %+v", bi)
	}

	info := b.Info().Runtime
	dir := b.Info().Dir
	syscall.Kill(info.VMMPid, syscall.SIGKILL)
	waitGone(t, "shim", info.ShimPid)
	_, err = b.Run(ctx, sh("true"))
	if !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "VMM exited unexpectedly") {
		t.Fatalf("exec after VMM was killed: %v", err)
	}
	if _, err := os.Stat(dir + "/shim.sock"); !os.IsNotExist(err) {
		t.Errorf("shim socket left behind: %v", err)
	}
	if err := rt.Remove(ctx, b.ID(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("box dir left behind: %v", err)
	}
	if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "removed") {
		t.Errorf("exec on the removed box: %v; want ErrInvalidState naming the state", err)
	}
	if _, err := rt.Get(ctx, b.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("removed box: %v", err)
	}
}

func TestSignal(t *testing.T) {
	e, err := shared.Exec(context.Background(), sh("echo ready; sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(e.Stdout, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("read %q: %v", buf, err)
	}
	if err := e.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(context.Background())
	if err != nil || st.Signal != int(syscall.SIGTERM) || st.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("got %+v, %v", st, err)
	}
	if err := e.Signal(syscall.SIGTERM); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Errorf("signal after exit: %v", err)
	}
}

// Close abandons a running exec: the guest kills it and the box goes on.
func TestCloseKillsProcess(t *testing.T) {
	e, err := shared.Exec(context.Background(), sh("echo $$; exec sleep 300"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscanln(e.Stdout, &pid); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if _, err := e.Wait(context.Background()); !errors.Is(err, errdefs.ErrClosed) {
		t.Errorf("wait after close: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res := runIn(t, shared, sh(fmt.Sprintf("kill -0 %d 2>/dev/null && echo alive || echo gone", pid)))
		if string(res.Stdout) == "gone\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running after Close", pid)
		}
	}
}

func hostMemMiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var kb int
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if kb == 0 {
		t.Fatal("no MemTotal in /proc/meminfo")
	}
	return kb >> 10
}

// TestKillEndsTheGroup: Kill of a shell ends its children too, so the exec
// ends at once, not when they would have (BoxLite's Execution.kill()).
func TestKillEndsTheGroup(t *testing.T) {
	ctx := context.Background()
	e, err := shared.Exec(ctx, sh("echo ready; sleep 100; echo done"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(e.Stdout, buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := e.Wait(wctx)
	if err != nil || st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("got %+v, %v after %s", st, err, time.Since(start))
	}
	if res := runIn(t, shared, sh("ps -o pid,args | grep -c '[s]leep 100'")); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("the shell's sleep survived the kill: %s", res.Stdout)
	}
}

// TestStopAndRemoveAreIdempotent: BoxLite's stop() of a stopped box and
// remove(force) of a running auto-remove box succeed.
func TestStopAndRemoveAreIdempotent(t *testing.T) {
	ctx := context.Background()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithAutoRemove(true))
	if err != nil {
		t.Fatal(err)
	}
	other, err := rt.Get(ctx, b.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, true); err != nil {
		t.Fatalf("remove(force) of a running auto-remove box: %v", err)
	}
	if err := other.Stop(ctx); err != nil {
		t.Errorf("stop of a box another handle removed: %v", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Errorf("second stop: %v", err)
	}
}
