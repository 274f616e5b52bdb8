package integration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Nothing under a home is open to other users while a box runs: every
// directory is 0700 and every file 0600 (sockets included).
func TestHomeIsPrivate(t *testing.T) {
	home := rt.Home()
	if res := runIn(t, shared, sh("echo hi > /root/f")); res.Code != 0 {
		t.Fatal("write in the box failed")
	}
	n := 0
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a temporary file went away
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		n++
		if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: open to other users", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked only %d paths under %s", n, home)
	}
}

// A home that another user owns is refused; one open to others is closed.
func TestHomeOwnership(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		other = "/" // owned by root, not by this user
	}
	if _, err := boxlite.NewRuntime(boxlite.WithHome(other)); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("home owned by another user: %v; want ErrInvalidState", err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	r, err := boxlite.NewRuntime(boxlite.WithHome(open))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o700 {
		t.Fatalf("open home left %v", fi.Mode().Perm())
	}
}

// A box directory whose box.json names another id (here, a path out of the
// home) is not a box: nothing can steer Remove to delete outside the home.
func TestForgedBoxRecord(t *testing.T) {
	victim := t.TempDir()
	boxes := filepath.Join(rt.Home(), "boxes")
	for name, id := range map[string]string{"0123456789ab": "../../../" + victim, "not-an-id": "not-an-id"} {
		d := filepath.Join(boxes, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		if err := os.WriteFile(filepath.Join(d, "box.json"), []byte(`{"id":"`+id+`","config":{"image":"x"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Get(context.Background(), id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("forged record %s (id %q): Get = %v; want not found", name, id, err)
		}
	}
	infos, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, bi := range infos {
		if bi.ID != shared.ID() && len(bi.ID) != 12 {
			t.Errorf("List shows forged box %q", bi.ID)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("victim directory: %v", err)
	}
}

// The shim serves only its owner and root (SO_PEERCRED), even when the
// socket's directory is opened up.
func TestShimRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes its uid to 65534 and must run as root (make test does)")
	}
	sock := filepath.Join(shared.Info().Dir, shimapi.SocketFile)
	dir := filepath.Dir(sock)
	for _, p := range []string{rt.Home(), filepath.Join(rt.Home(), "boxes"), dir} {
		os.Chmod(p, 0o711)
	}
	os.Chmod(sock, 0o666)
	defer func() {
		for _, p := range []string{rt.Home(), filepath.Join(rt.Home(), "boxes"), dir} {
			os.Chmod(p, 0o700)
		}
		os.Chmod(sock, 0o600)
	}()
	// Connect as uid 65534 and ask for info (a bare TInfo frame: length 0,
	// type 32, stream 1): the shim must close the connection unanswered.
	probe := `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:
    s.sendall(bytes([0, 0, 0, 0, 32, 0, 0, 0, 1]))
    s.settimeout(10)
    print("answered" if s.recv(9) else "refused")
except (ConnectionResetError, BrokenPipeError):
    print("refused")`
	cmd := exec.Command("/usr/bin/python3", "-c", probe, sock) // the system one: a uid without a home can run it
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "refused\n" {
		t.Fatalf("connection as uid 65534: %v: %s", err, out)
	}
	// The same probe as the owner is answered: the test can tell.
	if out, err := exec.Command("/usr/bin/python3", "-c", probe, sock).CombinedOutput(); err != nil || string(out) != "answered\n" {
		t.Fatalf("connection as the owner: %v: %s", err, out)
	}
}

// A running box's VMM is confined: another uid, no_new_privs, seccomp, its
// own mount namespace in which the home does not exist.
func TestVMMConfined(t *testing.T) {
	info := shared.Info()
	if info.Runtime == nil {
		t.Fatal("shared box is not running")
	}
	pid := info.Runtime.VMMPid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.Fields(v + " x")[0]
		}
	}
	if os.Getuid() == 0 && fields["Uid"] == "0" {
		t.Errorf("VMM of a root caller runs as root")
	}
	if fields["NoNewPrivs"] != "1" || fields["Seccomp"] != "2" {
		t.Errorf("VMM NoNewPrivs=%s Seccomp=%s, want 1 and 2", fields["NoNewPrivs"], fields["Seccomp"])
	}
	own, _ := os.Readlink("/proc/self/ns/mnt")
	vmm, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil || vmm == own {
		t.Errorf("VMM mount namespace %q (%v), ours %q", vmm, err, own)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, rt.Home())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the home is visible to the VMM: %v", err)
	}
	for _, w := range info.Runtime.Warnings {
		if strings.HasPrefix(w, "vmm confinement") {
			t.Errorf("box warns: %s", w)
		}
	}
	t.Logf("VMM pid %d: uid %s, NoNewPrivs %s, Seccomp %s; warnings %q", pid, fields["Uid"], fields["NoNewPrivs"], fields["Seccomp"], info.Runtime.Warnings)
}
