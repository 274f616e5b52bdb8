package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// The CLI, as a user runs it.
func TestCLIRun(t *testing.T) {
	cli := filepath.Join(repo, "build", "boxlite")
	cmd := exec.Command(cli, "run", "--rm", "alpine:latest", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v (stderr %q)", err, stderr.String())
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// --rm left nothing: only the shared box remains.
	infos, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name != "shared" {
			t.Errorf("box left behind: %+v", i)
		}
	}
}

// A box that is not detached dies with the process that created it, and an
// auto-remove box is removed then.
func TestBoxDiesWithCreator(t *testing.T) {
	if os.Getenv("BOXLITE_TEST_CREATOR") != "" {
		creator()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoxDiesWithCreator$")
	cmd.Env = append(os.Environ(), "BOXLITE_TEST_CREATOR=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var shimPid, vmmPid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "BOX %d %d %s", &shimPid, &vmmPid, &dir); n == 3 {
			break
		}
	}
	if shimPid == 0 {
		cmd.Wait()
		t.Fatal("creator did not report its box")
	}
	cmd.Process.Kill() // no chance to clean up
	cmd.Wait()
	waitGone(t, "shim", shimPid)
	waitGone(t, "VMM", vmmPid)
	// The box was auto-remove: with its creator gone, the shim removed it.
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("auto-remove box left behind: %v", err)
	}
	if _, err := rt.Get(context.Background(), filepath.Base(dir)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("auto-remove box still listed: %v", err)
	}
}

// creator runs in a child test process: it makes a box, reports it and waits to be killed.
func creator() {
	b, err := boxtest.CreateStarted(context.Background(), rt, "alpine:latest", boxlite.WithAutoRemove(true))
	if err != nil {
		fmt.Println("create:", err)
		os.Exit(1)
	}
	i := b.Info()
	fmt.Printf("BOX %d %d %s\n", i.Runtime.ShimPid, i.Runtime.VMMPid, i.Dir)
	time.Sleep(time.Minute)
	os.Exit(1)
}

// A box that cannot boot says why, with the console's last lines.
func TestBootFailureShowsConsole(t *testing.T) {
	assets := t.TempDir()
	os.MkdirAll(filepath.Join(assets, "guest"), 0o755)
	for _, f := range []string{"boxlite-shim", "boxlite-net", "guest/vmlinuz"} {
		if err := os.Symlink(filepath.Join(repo, "build", f), filepath.Join(assets, f)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(assets, "guest", "initramfs.cpio"), []byte("not an initramfs"), 0o644)
	r, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithAssets(assets))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = boxtest.CreateStarted(context.Background(), r, "alpine:latest", boxlite.WithBootTimeout(40*time.Second))
	if !errors.Is(err, errdefs.ErrBootFailed) || !strings.Contains(err.Error(), "console") || !strings.Contains(err.Error(), "Kernel panic") {
		t.Fatalf("want boot failure with the console tail, got %v", err)
	}
}
