package hv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "BOXLITE_HV_HELPER_DIR"

// TestDiesWithParent checks both halves of the VM's lifetime rule: QEMU
// survives the exit of the OS thread that called Start (Pdeathsig is tied to
// the forking thread, so Start forks elsewhere), and dies when the process
// that started it is killed.
func TestDiesWithParent(t *testing.T) {
	t.Parallel()
	g := guest(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndWait$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir,
		"BOXLITE_TEST_KERNEL="+g.kernel, "BOXLITE_HV_HELPER_INITRD="+g.initrd)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helperDone := make(chan struct{})
	go func() { cmd.Wait(); close(helperDone) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-helperDone })

	pids := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var pid int
			if _, err := fmt.Sscanf(sc.Text(), "QEMU-PID %d", &pid); err == nil {
				pids <- pid
			}
		}
	}()
	var pid int
	select {
	case pid = <-pids:
	case <-helperDone:
		t.Fatal("helper exited before starting a VM")
	case <-time.After(bootDeadline):
		t.Fatal("helper did not start a VM")
	}
	// The process is told apart from a later one with its pid by its start
	// time (field 22 of /proc/PID/stat).
	stat := func() (state, started string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return "", ""
		}
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) < 20 {
			return "", ""
		}
		return f[0], f[19]
	}
	_, born := stat()
	if born == "" {
		t.Fatalf("QEMU (pid %d) is gone at once", pid)
	}
	ours := func() bool { // alive, not a zombie, and the one the helper started
		state, started := stat()
		return started == born && state != "Z"
	}
	t.Cleanup(func() {
		if ours() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	time.Sleep(time.Second) // the thread that called Start is long gone
	if !ours() {
		t.Fatal("QEMU died when the thread that called Start exited")
	}
	cmd.Process.Kill()
	<-helperDone
	deadline := time.Now().Add(10 * time.Second)
	for ours() {
		if time.Now().After(deadline) {
			t.Fatalf("QEMU (pid %d) outlived the killed process that started it", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHelperStartAndWait is TestDiesWithParent's child process, not a test.
func TestHelperStartAndWait(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestDiesWithParent")
	}
	cfg := Config{
		Kernel:     os.Getenv("BOXLITE_TEST_KERNEL"),
		Initrd:     os.Getenv("BOXLITE_HV_HELPER_INITRD"),
		Cmdline:    "boxlite.test=hang",
		Channel:    true,
		ConsoleLog: filepath.Join(dir, "console.log"),
		Accel:      TCG,
	}
	type result struct {
		vm  *VM
		err error
		tid int
	}
	var r result
	for {
		res := make(chan result)
		go func() {
			runtime.LockOSThread()
			tid := syscall.Gettid()
			if tid == os.Getpid() {
				// Go never ends the main thread; try again elsewhere.
				runtime.UnlockOSThread()
				res <- result{tid: tid}
				return
			}
			vm, err := Start(cfg)
			res <- result{vm, err, tid}
			// Exiting while locked makes Go end this OS thread.
		}()
		if r = <-res; r.tid != os.Getpid() {
			break
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", r.tid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d that called Start did not exit", r.tid)
		}
	}
	fmt.Printf("QEMU-PID %d\n", r.vm.Pid())
	c := r.vm.Channel()
	defer c.Close()
	select {
	case <-r.vm.Done():
		t.Fatalf("VM exited: %v", r.vm.Err())
	case <-time.After(5 * time.Minute):
	}
}
