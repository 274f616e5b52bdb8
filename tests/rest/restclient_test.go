package rest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restclient"
)

// TestRestClientOptions: what New refuses, and that the key is in no error.
func TestRestClientOptions(t *testing.T) {
	for _, o := range []abi.RestOptions{
		{URL: "", APIKey: "k"},
		{URL: "ftp://127.0.0.1", APIKey: "k"},
		{URL: "http://example.com", APIKey: "k"}, // plain http beyond loopback
		{URL: "http://127.0.0.1:1", APIKey: ""},
		{URL: "http://user:pw@127.0.0.1:1", APIKey: "k"},
		{URL: "http://127.0.0.1:1", APIKey: "k", OutputLimit: -1},
	} {
		if _, err := restclient.New(o); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v): %v, want invalid_argument", o, err)
		}
	}
	if _, err := restclient.New(abi.RestOptions{URL: "http://example.com", APIKey: "k", InsecureHTTP: true}); err != nil {
		t.Errorf("insecure_http: %v", err)
	}
	// A wrong key: the server's 401 is invalid_argument, and the key is not in it.
	c, err := restclient.New(abi.RestOptions{URL: srv.url, APIKey: "not-a-key-secret-123"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(context.Background())
	if !errors.Is(err, errdefs.ErrInvalidArgument) || strings.Contains(err.Error(), "secret-123") {
		t.Errorf("a wrong key: %v", err)
	}
	// Nobody listening: unreachable.
	c, _ = restclient.New(abi.RestOptions{URL: "http://127.0.0.1:1", APIKey: key})
	if _, err := c.List(context.Background()); !errors.Is(err, errdefs.ErrUnreachable) || strings.Contains(err.Error(), key) {
		t.Errorf("no server: %v", err)
	}
}

func restClient(t *testing.T) *restclient.Client {
	t.Helper()
	c, err := restclient.New(abi.RestOptions{URL: srv.url, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRestClient drives one box through the client: create, exec with
// streams, stdin, signals, a timeout, kill, copies, info, list, metrics,
// sessions, errors of each kind, remove.
func TestRestClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := restClient(t)
	mem := 256
	keep := false // stopped, then removed by the test
	b, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "restclient-go", MemoryMiB: &mem, AutoRemove: &keep})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	if _, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "restclient-go"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second box of the name: %v, want already_exists", err)
	}
	if _, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Volumes: []abi.Volume{{HostPath: "/tmp", GuestPath: "/mnt"}}}); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("a host volume: %v, want unsupported", err)
	}
	if _, err := c.Get(ctx, "no-such-box"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get of no box: %v, want not_found", err)
	}

	res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"}})
	if err != nil || res.Code != 3 || string(res.Stdout) != "hello\n" || string(res.Stderr) != "oops\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"no-such-command"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a missing command: %v, want not_found", err)
	}
	if info := b.Info(); info.State != boxlite.StateRunning || info.Name != "restclient-go" {
		t.Errorf("info: %+v", info)
	}

	// 4 MiB through stdin and back, past every window on the way.
	e, err := b.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", "cat | wc -c"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		chunk := make([]byte, 64<<10)
		for range 64 {
			if _, err := e.Stdin.Write(chunk); err != nil {
				t.Errorf("stdin: %v", err)
				return
			}
		}
		e.Stdin.Close()
	}()
	res, err = e.Collect(ctx)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "4194304" {
		t.Errorf("stdin round trip: %q %v", res.Stdout, err)
	}

	// Closing the stdin of a process that has exited is no error (as on a
	// local runtime); writing to it is.
	e, err = b.Exec(ctx, boxlite.Command{Argv: []string{"true"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := e.Wait(ctx); err != nil || st.Code != 0 {
		t.Fatalf("true: %+v %v", st, err)
	}
	if _, err := e.Stdin.Write([]byte("late\n")); !errors.Is(err, errdefs.ErrClosed) {
		t.Errorf("write to the stdin of an exited process: %v, want closed", err)
	}
	if err := e.Stdin.Close(); err != nil {
		t.Errorf("close the stdin of an exited process: %v", err)
	}

	// 8 MiB of output, read slowly at first: nothing lost, in order.
	res, err = b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x"}})
	if err != nil || len(res.Stdout) != 8<<20 || strings.Trim(string(res.Stdout), "x") != "" {
		t.Errorf("8 MiB: %d bytes, %v", len(res.Stdout), err)
	}

	// A signal, then how it ended.
	e, err = b.Exec(ctx, boxlite.Command{Argv: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(ctx)
	if err != nil || st.Code != 143 || st.Signal != int(syscall.SIGTERM) {
		t.Errorf("SIGTERM: %+v %v", st, err)
	}
	if err := e.Signal(syscall.SIGTERM); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Errorf("a signal after the end: %v", err)
	}
	// Kill.
	e, _ = b.Exec(ctx, boxlite.Command{Argv: []string{"sleep", "300"}})
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Wait(ctx); st.Signal != int(syscall.SIGKILL) {
		t.Errorf("kill: %+v", st)
	}
	// The command's own timeout.
	res, err = b.Run(ctx, boxlite.Command{Argv: []string{"sleep", "300"}, Timeout: time.Second})
	if !errors.Is(err, errdefs.ErrTimeout) || res == nil || !res.TimedOut {
		t.Errorf("timeout: %+v %v", res, err)
	}
	// Close abandons.
	e, _ = b.Exec(ctx, boxlite.Command{Argv: []string{"sleep", "300"}})
	if err := e.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := e.Wait(ctx); !errors.Is(err, errdefs.ErrClosed) {
		t.Errorf("wait after close: %v", err)
	}

	// Copies: a file, a directory, back out.
	work := t.TempDir()
	os.MkdirAll(filepath.Join(work, "src", "sub"), 0o755)
	os.WriteFile(filepath.Join(work, "src", "sub", "b.txt"), []byte("beta\n"), 0o644)
	os.WriteFile(filepath.Join(work, "a.txt"), []byte("alpha\n"), 0o600)
	if err := b.CopyIn(ctx, filepath.Join(work, "a.txt"), "/root/a.txt", boxlite.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyIn(ctx, filepath.Join(work, "src"), "/srv", boxlite.CopyOptions{Layout: boxlite.LayoutBoxLite}); err != nil {
		t.Fatal(err)
	}
	res, _ = b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "cat /root/a.txt /srv/src/sub/b.txt; stat -c %a /root/a.txt"}})
	if string(res.Stdout) != "alpha\nbeta\n600\n" {
		t.Errorf("copied in: %q", res.Stdout)
	}
	// The layouts (docker's, the zero value, as a local box: a directory
	// becomes a destination that does not exist; BoxLite's: always inside).
	for _, dst := range []string{"/app-docker", "/app-docker", "/app-boxlite"} {
		o := boxlite.CopyOptions{}
		if dst == "/app-boxlite" {
			o.Layout = boxlite.LayoutBoxLite
		}
		if err := b.CopyIn(ctx, filepath.Join(work, "src"), dst, o); err != nil {
			t.Fatal(err)
		}
	}
	res, _ = b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "cd / && find app-docker app-boxlite -name b.txt | sort"}})
	if want := "app-boxlite/src/sub/b.txt\napp-docker/src/sub/b.txt\napp-docker/sub/b.txt\n"; string(res.Stdout) != want {
		t.Errorf("layouts over REST: %q, want %q", res.Stdout, want)
	}
	if info, err := c.Get(ctx, "restclient-go"); err != nil || info.Info().Runtime == nil || time.Since(info.Info().Runtime.StartedAt) > 10*time.Minute {
		t.Errorf("started_at of a running box: %+v %v", info.Info().Runtime, err)
	}
	if err := b.CopyOut(ctx, "/srv/src", filepath.Join(work, "out"), boxlite.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(work, "out", "sub", "b.txt")); err != nil || string(data) != "beta\n" {
		t.Errorf("copied out: %q %v", data, err)
	}
	if err := b.CopyOut(ctx, "/no/such", filepath.Join(work, "none"), boxlite.CopyOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("copy out of nothing: %v", err)
	}

	// A tunnel through the server's CONNECT listener: a request, the
	// half-close, the answer to EOF; a port nothing listens on fails.
	b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "mkdir -p /w && echo go-tunnel > /w/index.html && (httpd -f -p 127.0.0.1:8000 -h /w </dev/null >/dev/null 2>&1 &)"}})
	var page []byte
	for i := 0; i < 50 && !bytes.HasSuffix(page, []byte("go-tunnel\n")); i++ {
		tc, err := b.DialTunnel(ctx, 8000)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		tc.Write([]byte("GET /index.html HTTP/1.0\r\n\r\n"))
		tc.CloseWrite()
		page, _ = io.ReadAll(tc)
		tc.Close()
	}
	if !bytes.HasSuffix(page, []byte("go-tunnel\n")) {
		t.Errorf("tunnel: %q", page)
	}
	if _, err := b.DialTunnel(ctx, 8001); !errors.Is(err, errdefs.ErrUnreachable) {
		t.Errorf("tunnel to a closed port: %v, want unreachable", err)
	}

	// A shell session: state kept, a timed-out command interrupted through
	// its process group (the server's process_group extension).
	sh, err := b.NewShellSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := sh.Exec(ctx, []string{"cd", "/srv"}, nil, 0); err != nil {
		t.Fatal(err)
	}
	r, err := sh.Exec(ctx, []string{"pwd"}, nil, 0)
	if err != nil || string(r.Stdout) != "/srv\n" {
		t.Errorf("shell state: %+v %v", r, err)
	}
	r, err = sh.Exec(ctx, []string{"sleep", "300"}, nil, 2*time.Second)
	if !errors.Is(err, errdefs.ErrTimeout) || errors.Is(err, boxlite.ErrSessionRestarted) {
		t.Errorf("interrupted command: %+v %v", r, err)
	}
	if r, err := sh.Exec(ctx, []string{"pwd"}, nil, 0); err != nil || string(r.Stdout) != "/srv\n" {
		t.Errorf("the shell after an interrupt: %+v %v", r, err)
	}

	infos, err := c.List(ctx)
	found := false
	for _, in := range infos {
		found = found || in.ID == b.ID()
	}
	if err != nil || !found {
		t.Errorf("list: %v, box found %v", err, found)
	}
	if m, err := b.Metrics(ctx); err != nil || m.CommandsExecutedTotal == 0 {
		t.Errorf("metrics: %+v %v", m, err)
	}
	if imgs, err := c.Images(ctx); err != nil || len(imgs) == 0 {
		t.Errorf("images: %v %v", imgs, err)
	}
	if err := b.Remove(ctx, false); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Errorf("remove of a running box without force: %v", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, b.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after remove: %v", err)
	}
}

// TestRestClientDisks: snapshots, a clone and an export of a stopped box,
// through the client.
func TestRestClientDisks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := restClient(t)
	keep := false // snapshots need it stopped
	b, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "restclient-disks", AutoRemove: &keep})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	if res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "echo one > /root/f"}}); err != nil || res.Code != 0 {
		t.Fatalf("write: %+v %v", res, err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	si, err := b.CreateSnapshot(ctx, "s1")
	if err != nil || si.Name != "s1" || si.BoxID != b.ID() {
		t.Fatalf("snapshot: %+v %v", si, err)
	}
	if all, err := b.Snapshots(ctx); err != nil || len(all) != 1 {
		t.Errorf("snapshots: %+v %v", all, err)
	}
	if _, err := b.Snapshot(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("no such snapshot: %v", err)
	}
	if _, err := b.Clone(ctx, boxlite.CloneOptions{Snapshot: "s1"}); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("clone of a snapshot: %v, want unsupported", err)
	}
	cl, err := b.Clone(ctx, boxlite.CloneOptions{Name: "restclient-clone"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Remove(context.Background(), true)
	if res, err := cl.Run(ctx, boxlite.Command{Argv: []string{"cat", "/root/f"}}); err != nil || string(res.Stdout) != "one\n" {
		t.Errorf("the clone's disk: %+v %v", res, err)
	}
	dir := t.TempDir()
	path, err := b.Export(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || path != filepath.Join(dir, "restclient-disks.boxlite") || st.Size() == 0 {
		t.Errorf("export: %s %v %v", path, st, err)
	}
	if err := b.RestoreSnapshot(ctx, "s1"); err != nil {
		t.Error(err)
	}
	if err := b.RemoveSnapshot(ctx, "s1"); err != nil {
		t.Error(err)
	}
}

// TestRestClientPausedReader: a caller that stops reading for longer than
// the server's send timeout (30 s) makes the server drop the attach; the
// client makes it again when the caller reads, and nothing is lost.
//
// The second exec is silent until after the server's first ping: the ping
// then sits in the client's socket before the output, and the client's
// answer to it reaches a server that has dropped the attach meanwhile. A
// closed socket answers that with a reset, which makes the client's kernel
// throw away the output it still holds; the server's lingering close (it
// reads until the client closes) keeps it.
func TestRestClientPausedReader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := restClient(t)
	b, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "restclient-paused"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// 16 MiB of numbered lines: more than every window on the way.
	for _, script := range []string{"seq 1 2000000", "sleep 7; seq 1 2000000"} {
		e, err := b.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(45 * time.Second) // past the server's send timeout, with nothing read
		res, err := e.Collect(ctx)
		if err != nil || res.Code != 0 {
			t.Fatalf("%s: collect: %v %+v", script, err, res.ExitStatus)
		}
		lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
		if len(lines) != 2000000 || lines[0] != "1" || lines[len(lines)-1] != "2000000" {
			t.Fatalf("%s: %d lines, first %q, last %q", script, len(lines), lines[0], lines[len(lines)-1])
		}
		for i, l := range lines {
			if l != strconv.Itoa(i+1) {
				t.Fatalf("%s: line %d is %q", script, i+1, l)
			}
		}
	}
}

// TestRestClientPauseFork: boxlite's pause, resume and fork routes through
// the client: a paused box says so and comes back as the same machine by
// an exec; forks run with the source's files, each a machine of its own.
func TestRestClientPauseFork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := restClient(t)
	b, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "restclient-pause"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	run := func(b *restclient.Box, script string) string {
		t.Helper()
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", script}})
		if err != nil || res.Code != 0 {
			t.Fatalf("run %q: %+v %v", script, res, err)
		}
		return string(res.Stdout)
	}
	boot := run(b, "echo kept > /tmp/f; cat /proc/sys/kernel/random/boot_id")
	p, err := b.Pause(ctx)
	if err != nil || p.StateBytes <= 0 || p.SavedAt.IsZero() {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if got, err := c.Get(ctx, "restclient-pause"); err != nil || got.Info().State != boxlite.StatePaused {
		t.Fatalf("after pause: %v %v", got.Info().State, err)
	}
	if got := run(b, "cat /tmp/f /proc/sys/kernel/random/boot_id"); got != "kept\n"+boot {
		t.Fatalf("after the resume by an exec: %q", got)
	}
	if _, err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx); err != nil || b.Info().State != boxlite.StateRunning {
		t.Fatalf("resume: %v %v", b.Info().State, err)
	}
	if status, body := call(t, "POST", "/v1/boxes/restclient-pause/fork", key, strings.NewReader(`{"count": 65}`), "application/json"); status != 400 {
		t.Fatalf("a fork of 65: %d %s", status, body)
	}
	forks, err := b.Fork(ctx, 2, []string{"restclient-fork-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		defer f.Remove(context.Background(), true)
	}
	if len(forks) != 2 || forks[0].Info().Name != "restclient-fork-a" {
		t.Fatalf("forks: %d, first %q", len(forks), forks[0].Info().Name)
	}
	for i, f := range forks {
		if got := run(f, "cat /tmp/f /proc/sys/kernel/random/boot_id"); !strings.HasPrefix(got, "kept\n") || got == "kept\n"+boot {
			t.Fatalf("fork %d: %q", i, got)
		}
	}
}
