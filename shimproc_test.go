package boxlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// fakeShimEnv makes the test binary a stand-in for a booting shim: run as
// `boxlite.test BOXDIR/shim.json`, it takes the box's lock and writes its pid
// there as boxlite-shim does, starts a "VMM" (sleep, without a
// parent-death signal, so only an explicit kill ends it), writes the
// VMM's pid to vmm.pid and never serves the box.
const fakeShimEnv = "BOXLITE_CORE_TEST_FAKE_SHIM"

func init() {
	if os.Getenv(fakeShimEnv) == "" {
		return
	}
	dir := filepath.Dir(os.Args[1])
	f, err := os.OpenFile(filepath.Join(dir, shimapi.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil || unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		os.Exit(3)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	vmm := exec.Command("sleep", "600")
	if vmm.Start() != nil {
		os.Exit(4)
	}
	os.WriteFile(filepath.Join(dir, "vmm.pid"), []byte(strconv.Itoa(vmm.Process.Pid)), 0o600)
	select {}
}

// ended reports whether pid has exited (gone, or a zombie nobody reaped yet).
func ended(pid int) bool {
	st, ok := procStat(pid)
	return !ok || st.state == "Z" || st.state == "X"
}

// A shim that holds a box's lock but has no socket yet (a start under way,
// or interrupted) makes the box "starting", not stopped; remove refuses
// it without force; stop and remove with force end it and the VMM it
// started, whatever signal they ignore; a pid in the lock file that does
// not hold the lock is never signalled.
func TestBootingShimIsFoundByItsLock(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	start := func(b *Box) (shim *exec.Cmd, vmm int) {
		t.Helper()
		cmd := exec.Command(os.Args[0], b.path(shimapi.ConfigFile))
		cmd.Env = append(os.Environ(), fakeShimEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		go cmd.Wait() // reap it as spawnShim would
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(b.path("vmm.pid")); err == nil && len(b) > 0 {
				vmm, _ = strconv.Atoi(string(b))
				t.Cleanup(func() { syscall.Kill(vmm, syscall.SIGKILL) })
				return cmd, vmm
			}
			if time.Now().After(deadline) {
				t.Fatal("the fake shim did not start its VMM")
			}
		}
	}

	b := testBox(t, r)
	shim, vmm := start(b)
	if s := b.Info().State; s != StateStarting {
		t.Fatalf("box with a booting shim is %s, want starting", s)
	}
	if err := b.Remove(ctx, false); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("remove without force: %v", err)
	}
	if ended(shim.Process.Pid) || ended(vmm) {
		t.Fatal("remove without force ended the shim")
	}
	if err := b.Remove(ctx, true); err != nil {
		t.Fatal(err)
	}
	if !ended(shim.Process.Pid) || !ended(vmm) {
		t.Fatalf("after remove -f: shim %d ended %v, VMM %d ended %v", shim.Process.Pid, ended(shim.Process.Pid), vmm, ended(vmm))
	}
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Fatalf("box directory: %v", err)
	}

	b2 := testBox(t, r)
	shim, vmm = start(b2)
	if err := b2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !ended(shim.Process.Pid) || !ended(vmm) {
		t.Fatal("stop left the booting shim or its VMM")
	}
	if s := b2.Info().State; s == StateStarting {
		t.Fatalf("after stop: %s", s)
	}

	// A stale or forged pid: this test process holds no lock on the file.
	b3 := testBox(t, r)
	os.WriteFile(b3.path(shimapi.LockFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	if p := b3.lockHolder(); p != nil {
		t.Fatalf("lockHolder trusted pid %d, which holds no lock", p.pid)
	}
	// Nor does a process that holds the lock for a disk operation (this one).
	unlock, err := b3.lockDisk("test")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if p := b3.lockHolder(); p != nil {
		t.Fatalf("lockHolder took a runtime holding the lock (pid %d) for a shim", p.pid)
	}
	if s := b3.Info().State; s == StateStarting {
		t.Fatal("a disk operation's lock made the box starting")
	}
}
