package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/hostaddr"
	"github.com/boxlite/boxlite/tests/internal/proc"
)

// tryConnect, run with python3 in a box: "tryConnect HOST:PORT..." prints
// one line per target, "HOST:PORT reached:<what the server sent>" or
// "HOST:PORT refused:<error>".
const tryConnect = `
import socket, sys
for t in sys.argv[1:]:
    host, port = t.rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.settimeout(5)
        s.sendall(b"ping")
        got = s.recv(100).decode(errors="replace")
        s.close()
        print(t, "reached:" + got, flush=True)
    except Exception as e:
        print(t, "refused:" + type(e).__name__, flush=True)
`

// TestHostWide: what must be host-wide is shared by every home. Two homes
// start a box each at the same moment: the confined processes of the boxes
// (VMM and network stack) all get uids of their own (a root caller's), and
// the box of home A cannot reach a port published by the box of home B,
// neither through the host alias nor through the host's own address,
// while it reaches a plain host listener the same way.
func TestHostWide(t *testing.T) {
	t.Parallel()
	needPython(t)
	ctx := context.Background()
	hostIP := hostaddr.OwnIPv4(t)

	homeB, err := os.MkdirTemp("", "bxh")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(homeB)
	rtB, err := boxlite.NewRuntime(boxlite.WithHome(homeB))
	if err != nil {
		t.Fatal(err)
	}
	defer rtB.Close()
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := rtB.Images().Load(lctx, os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")); err != nil {
		t.Fatal(err)
	}

	a, err := rt.Create(ctx, "python:slim")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Remove(context.Background(), true)
	b, err := rtB.Create(ctx, "python:slim", boxlite.WithPorts(boxlite.Port{HostIP: "0.0.0.0", GuestPort: 8000}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// Both starts at once: each shim allocates its uids while the other
	// does.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	gate := make(chan struct{})
	for i, box := range []*boxlite.Box{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			errs[i] = box.Start(sctx)
		}()
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start the box of home %c: %v", 'A'+i, err)
		}
	}

	t.Run("uids", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("this half needs a root caller (only root gives boxes uids of their own); run the suite as root")
		}
		seen := map[string]string{}
		for _, c := range []struct {
			name string
			box  *boxlite.Box
		}{{"home A", a}, {"home B", b}, {"the shared box", shared}} {
			info := c.box.Info().Runtime
			stacks := proc.ChildrenNamed(info.ShimPid, "boxlite-net")
			if len(stacks) != 1 {
				t.Fatalf("%s: network stack processes %v, want one", c.name, stacks)
			}
			for what, pid := range map[string]int{"VMM": info.VMMPid, "network stack": stacks[0]} {
				uid := statusUID(t, pid)
				who := fmt.Sprintf("the %s of %s (pid %d)", what, c.name, pid)
				t.Logf("%s: uid %s", who, uid)
				if uid == "0" {
					t.Errorf("%s runs as root", who)
				}
				if other, dup := seen[uid]; dup {
					t.Errorf("%s and %s share uid %s", who, other, uid)
				}
				seen[uid] = who
			}
		}
	})

	t.Run("published port of another home", func(t *testing.T) {
		srv, err := b.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c", inBoxServer}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if res := runIn(t, b, sh("for i in $(seq 200); do [ -e /tmp/ready ] && exit 0; sleep 0.1; done; exit 1")); res.Code != 0 {
			t.Fatal("the server in home B's box did not start")
		}
		port := b.Info().Runtime.Network.Ports[0].HostPort
		// The port works from the host, by loopback and by the host's
		// own address.
		for _, addr := range []string{"127.0.0.1", hostIP.String()} {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, fmt.Sprint(port)), 5*time.Second)
			if err != nil {
				t.Fatalf("the host cannot reach home B's published port at %s: %v", addr, err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("ping"))
			got, _ := readAll(c)
			c.Close()
			if got != "tcp:ping" {
				t.Fatalf("host to %s:%d: %q", addr, port, got)
			}
		}
		// A plain host listener, the control: reached the same ways.
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("plain"))
				c.Close()
			}
		}()
		plain := ln.Addr().(*net.TCPAddr).Port
		targets := []string{
			fmt.Sprintf("host.boxlite.internal:%d", plain), fmt.Sprintf("%s:%d", hostIP, plain),
			fmt.Sprintf("host.boxlite.internal:%d", port), fmt.Sprintf("%s:%d", hostIP, port),
		}
		res := runIn(t, a, boxlite.Command{Argv: append([]string{"python3", "-c", tryConnect}, targets...)})
		out := string(res.Stdout)
		t.Logf("home A's box:\n%s%s", out, res.Stderr)
		for _, tg := range targets[:2] {
			if !strings.Contains(out, tg+" reached:plain") {
				t.Errorf("home A's box did not reach the host listener at %s (the control)", tg)
			}
		}
		for _, tg := range targets[2:] {
			if !strings.Contains(out, tg+" refused:") {
				t.Errorf("home A's box reached home B's published port at %s", tg)
			}
		}
		if log, _ := os.ReadFile(filepath.Join(a.Info().Dir, "shim.log")); !strings.Contains(string(log), "a box's published port") {
			t.Errorf("home A's box log does not say why it was refused")
		}
	})
}

// statusUID is the real uid of pid, from /proc/<pid>/status.
func statusUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("/proc/%d/status has no Uid line", pid)
	return ""
}
