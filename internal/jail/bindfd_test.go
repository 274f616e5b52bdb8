package jail_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/jail"
)

// runSh runs a shell script confined with spec's binds and DenySetID and
// returns its output and Wait's error.
func runSh(t *testing.T, spec jail.Spec, script string) (string, error) {
	t.Helper()
	var out strings.Builder
	pr, pw, _ := os.Pipe()
	done := make(chan struct{})
	go func() { io.Copy(&out, pr); close(done) }()
	spec.Path, spec.Args, spec.KeepRoot = "/bin/sh", []string{"sh", "-c", script}, true
	spec.Stdout, spec.Stderr = pw, pw
	c, err := jail.Command("", spec)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return "", err
	}
	err = waitTimeout(t, c, 30*time.Second)
	<-done
	return out.String(), err
}

// A bind from a descriptor binds the file the caller opened, whatever its
// path leads to at Start: with open_tree (root) the moved-away original,
// without it (the stage opens the path again) an error naming the bind.
func TestBindFromFile(t *testing.T) {
	requireRoot(t)
	for _, tree := range []bool{true, false} {
		name := map[bool]string{true: "OpenTree", false: "Reopen"}[tree]
		t.Run(name, func(t *testing.T) {
			if !tree {
				defer jail.NoOpenTree()()
			}
			dir := t.TempDir()
			src, other := filepath.Join(dir, "src"), filepath.Join(dir, "other")
			for d, text := range map[string]string{src: "original\n", other: "other\n"} {
				os.Mkdir(d, 0o755)
				os.WriteFile(filepath.Join(d, "f"), []byte(text), 0o644)
			}
			f, err := os.OpenFile(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			spec := jail.Spec{Binds: []jail.Bind{{Host: src, File: f, Inside: "/data", Writable: true}}}

			// Unchanged: either way binds the directory.
			out, err := runSh(t, spec, "cat /data/f && echo new > /data/g")
			if err != nil || out != "original\n" {
				t.Fatalf("unchanged: %q, %v", out, err)
			}
			if b, _ := os.ReadFile(filepath.Join(src, "g")); string(b) != "new\n" {
				t.Fatalf("write through the bind: host has %q", b)
			}

			// The path now is a symlink to another directory.
			if err := os.Rename(src, src+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, src); err != nil {
				t.Fatal(err)
			}
			out, err = runSh(t, spec, "cat /data/f")
			if tree {
				if err != nil || out != "original\n" {
					t.Fatalf("swapped, open_tree: %q, %v; want the original directory", out, err)
				}
				return
			}
			var se *jail.StageError
			if !errors.As(err, &se) || !errors.Is(err, unix.ELOOP) || !strings.Contains(se.Step, src) {
				t.Fatalf("swapped, reopen: %q, %v; want a stage error naming %s with ELOOP", out, err, src)
			}
			// A real directory in its place, not the one opened: ESTALE.
			os.Remove(src)
			os.Mkdir(src, 0o755)
			out, err = runSh(t, spec, "ls /data")
			if !errors.As(err, &se) || !errors.Is(err, unix.ESTALE) {
				t.Fatalf("replaced, reopen: %q, %v; want ESTALE", out, err)
			}
		})
	}
}

// DenySetID: no set-id bit by chmod or create, no device node, no xattr,
// openat2 ENOSYS; ordinary modes, FIFOs and files work.
func TestDenySetID(t *testing.T) {
	requireRoot(t)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("this test runs %s in the jail: %v", py, err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	script := `
import ctypes, os, stat
d = "/w"
def tryit(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, os.strerror(e.errno))
open(d + "/plain", "w").close()
tryit("chmod755", lambda: os.chmod(d + "/plain", 0o755))
tryit("chmod4755", lambda: os.chmod(d + "/plain", 0o4755))
tryit("chmod2755", lambda: os.chmod(d + "/plain", 0o2755))
fd = os.open(d + "/plain", os.O_RDONLY)
tryit("fchmod6755", lambda: os.fchmod(fd, 0o6755))
tryit("creat4755", lambda: os.close(os.open(d + "/suid", os.O_CREAT | os.O_WRONLY, 0o4755)))
tryit("mkdir2755", lambda: os.mkdir(d + "/sgid", 0o2755))
tryit("mkdir755", lambda: os.mkdir(d + "/dir", 0o755))
tryit("mknodchr", lambda: os.mknod(d + "/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
tryit("mknodblk", lambda: os.mknod(d + "/blk", 0o666 | stat.S_IFBLK, os.makedev(7, 0)))
tryit("mkfifo", lambda: os.mkfifo(d + "/fifo", 0o644))
tryit("mkfifo4755", lambda: os.mknod(d + "/fifo2", 0o4755 | stat.S_IFIFO))
tryit("setxattr", lambda: os.setxattr(d + "/plain", "security.capability", b"\x01\x00\x00\x02" + b"\x00" * 16))
tryit("usersetxattr", lambda: os.setxattr(d + "/plain", "user.x", b"1"))
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(0, 0, 0)
r = libc.syscall(437, -100, b"/", ctypes.byref(how), 24)
print("openat2", "ok" if r >= 0 else os.strerror(ctypes.get_errno()))
`
	spec := jail.Spec{DenySetID: true, Binds: []jail.Bind{{Host: dir, Inside: "/w", Writable: true}}}
	out, err := runSh(t, spec, py+" -c '"+script+"'")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{
		"chmod755": "ok", "chmod4755": "Operation not permitted", "chmod2755": "Operation not permitted",
		"fchmod6755": "Operation not permitted", "creat4755": "Operation not permitted",
		"mkdir2755": "Operation not permitted", "mkdir755": "ok",
		"mknodchr": "Operation not permitted", "mknodblk": "Operation not permitted",
		"mkfifo": "ok", "mkfifo4755": "Operation not permitted",
		"setxattr": "Operation not permitted", "usersetxattr": "Operation not permitted",
		"openat2": "Function not implemented",
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && (fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeDevice|os.ModeCharDevice) != 0) {
			t.Errorf("%s on the host: %v", p, fi.Mode())
		}
		return nil
	})
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
