package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
	"github.com/boxlite/boxlite/tests/internal/proc"
)

// hostServer is an HTTP server on the host's 127.0.0.1, for boxes to reach
// as host.boxlite.internal. /hi says hello; /gate/N answers once N requests
// to it are open at the same time (or after 20 s), so a box that completes
// N of them proves N concurrent connections.
type hostServer struct {
	port int
	hits atomic.Int64
}

func startHostServer(t *testing.T) *hostServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hostServer{port: ln.Addr().(*net.TCPAddr).Port}
	var mu sync.Mutex
	open := 0
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hi", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fmt.Fprint(w, "hello from the host\n")
	})
	mux.HandleFunc("/gate/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/gate/"), "%d", &n)
		mu.Lock()
		if open++; open == n {
			close(release)
		}
		mu.Unlock()
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		fmt.Fprintf(w, "open=%d\n", n)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// netBox creates a box for one network scenario.
func netBox(t *testing.T, image string, opts ...boxlite.BoxOption) *boxlite.Box {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, image, opts...)
	if err != nil {
		t.Fatalf("create %s: %v", image, err)
	}
	t.Cleanup(func() { b.Remove(context.Background(), true) })
	return b
}

// inBoxServer serves TCP and UDP in a python:slim box: each answers what it
// gets, prefixed with its protocol.
const inBoxServer = `
import socket, threading
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 9000))
    while True:
        d, a = s.recvfrom(65535)
        s.sendto(b"udp:" + d, a)
threading.Thread(target=udp, daemon=True).start()
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 8000))
t.listen(16)
open("/tmp/ready", "w").close()
while True:
    c, _ = t.accept()
    c.sendall(b"tcp:" + c.recv(1024))
    c.close()
`

// TestNetwork boots one box per network scenario (and uses the shared,
// default one): reaching the host by its alias, 100 connections at once,
// allow_net by name and by address, a box without a network, published TCP
// and UDP ports, and boxes not reaching each other.
func TestNetwork(t *testing.T) {
	t.Parallel()
	if os.Getenv("BOXLITE_TEST_PYTHON_IMAGE") == "" {
		t.Fatal("BOXLITE_TEST_PYTHON_IMAGE is not set: `make test` builds the python:slim test image and sets it")
	}
	needPython(t)
	host := startHostServer(t)
	hi := fmt.Sprintf("http://host.boxlite.internal:%d/hi", host.port)

	var restricted, allowed, off, pub *boxlite.Box
	var wg sync.WaitGroup
	for _, c := range []struct {
		b     **boxlite.Box
		image string
		opts  []boxlite.BoxOption
	}{
		{&restricted, "alpine:latest", []boxlite.BoxOption{boxlite.WithNetwork(boxlite.NetworkSpec{AllowNet: []string{"example.invalid"}})}},
		{&allowed, "alpine:latest", []boxlite.BoxOption{boxlite.WithNetwork(boxlite.NetworkSpec{AllowNet: []string{"host.boxlite.internal"}})}},
		{&off, "alpine:latest", []boxlite.BoxOption{boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled})}},
		{&pub, "python:slim", []boxlite.BoxOption{boxlite.WithPorts(boxlite.Port{GuestPort: 8000}, boxlite.Port{GuestPort: 9000, Protocol: "udp"})}},
	} {
		wg.Add(1)
		go func() { defer wg.Done(); *c.b = netBox(t, c.image, c.opts...) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	t.Run("host alias", func(t *testing.T) {
		res := runIn(t, shared, sh("cat /etc/resolv.conf; wget -q -O- "+hi))
		if res.Code != 0 || !strings.Contains(string(res.Stdout), "hello from the host") {
			t.Fatalf("fetch via the host alias: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		if !strings.Contains(string(res.Stdout), "nameserver 192.168.127.1") {
			t.Errorf("resolv.conf is not the box network's:\n%s", res.Stdout)
		}
		info := shared.Info().Runtime.Network
		if info == nil || info.GuestIP != "192.168.127.2" {
			t.Errorf("box info network = %+v", info)
		}
	})

	t.Run("stack confined", func(t *testing.T) {
		pids := proc.ChildrenNamed(shared.Info().Runtime.ShimPid, "boxlite-net")
		if len(pids) != 1 {
			t.Fatalf("network stack processes of the shared box: %v", pids)
		}
		proc := fmt.Sprintf("/proc/%d", pids[0])
		status, _ := os.ReadFile(proc + "/status")
		if !strings.Contains(string(status), "NoNewPrivs:\t1") || !strings.Contains(string(status), "Seccomp:\t2") {
			t.Errorf("no_new_privs or seccomp missing:\n%s", status)
		}
		if os.Getuid() == 0 && strings.Contains(string(status), "Uid:\t0\t") {
			t.Errorf("the network stack of a root caller runs as root")
		}
		own, _ := os.Readlink("/proc/self/ns/mnt")
		if ns, _ := os.Readlink(proc + "/ns/mnt"); ns == own {
			t.Errorf("the network stack shares our mount namespace")
		}
		if _, err := os.Stat(proc + "/root" + rt.Home()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the home is visible to the network stack: %v", err)
		}
		for _, w := range shared.Info().Runtime.Warnings {
			if strings.HasPrefix(w, "network stack confinement") {
				t.Errorf("box warns: %s", w)
			}
		}
	})

	t.Run("100 connections at once", func(t *testing.T) {
		script := fmt.Sprintf(`for i in $(seq 100); do wget -q -O /tmp/gate.$i http://host.boxlite.internal:%d/gate/100 & done; wait
			cat /tmp/gate.* | grep -c open=100; rm -f /tmp/gate.*`, host.port)
		res := runIn(t, shared, boxlite.Command{Argv: []string{"sh", "-c", script}, Timeout: 2 * time.Minute})
		if got := strings.TrimSpace(string(res.Stdout)); got != "100" {
			t.Fatalf("%s of 100 connections completed together (exit %d)\n%s", got, res.Code, res.Stderr)
		}
		if st, err := shared.NetworkStats(context.Background()); err != nil || st.TCPConns < 100 || st.BytesToGuest == 0 {
			t.Errorf("network stats: %+v, %v", st, err)
		}
	})

	t.Run("allow_net blocks the host alias", func(t *testing.T) {
		before := host.hits.Load()
		// Refusals end wget with 1; a connection left hanging would end
		// it with timeout's 143 instead.
		res := runIn(t, restricted, sh(`nslookup host.boxlite.internal; echo "dns=$?"
			timeout 5 wget -q -O- `+hi+`; echo "name=$?"
			timeout 5 wget -q -O- http://192.168.127.254:`+fmt.Sprint(host.port)+`/hi; echo "raw=$?"
			timeout 3 nslookup -type=a example.invalid 192.0.2.53; echo "resolver=$?"
			cat /etc/hosts`))
		out := string(res.Stdout)
		for _, want := range []string{"name=1", "raw=1"} {
			if !strings.Contains(out, want) {
				t.Errorf("want %s:\n%s%s", want, out, res.Stderr)
			}
		}
		if strings.Contains(out, "resolver=0") {
			t.Errorf("a second resolver answered:\n%s", out)
		}
		if strings.Contains(out, "dns=0") || strings.Contains(out, "192.168.127.254") {
			t.Errorf("the host alias resolves in a box that may not reach it:\n%s", out)
		}
		if host.hits.Load() != before {
			t.Errorf("the host server was reached")
		}
		if st, err := restricted.NetworkStats(context.Background()); err != nil || st.Blocked < 2 {
			t.Errorf("network stats: %+v, %v; want the refusals counted", st, err)
		}
		log, _ := os.ReadFile(filepath.Join(restricted.Info().Dir, "shim.log"))
		for _, want := range []string{`refused DNS name "host.boxlite.internal"`, "refused tcp to 192.168.127.254:", "refused udp to 192.0.2.53:53"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("shim log lacks %q", want)
			}
		}
	})

	t.Run("allow_net lists the host alias", func(t *testing.T) {
		res := runIn(t, allowed, sh("timeout 10 wget -q -O- "+hi))
		if res.Code != 0 || !strings.Contains(string(res.Stdout), "hello from the host") {
			t.Fatalf("exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		// A port nobody listens on: the host's connect is refused, the
		// box's fails, and the box's metrics count a TCP error.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		res = runIn(t, allowed, sh(fmt.Sprintf("timeout 10 wget -q -O- http://host.boxlite.internal:%d/; echo fetch=$?", closed)))
		if !strings.Contains(string(res.Stdout), "fetch=1") {
			t.Errorf("fetch from a closed port: %s%s", res.Stdout, res.Stderr)
		}
		m, err := allowed.Metrics(context.Background())
		if err != nil || m.NetworkTCPErrors == nil || *m.NetworkTCPErrors != 1 || m.NetworkTCPConnections == nil || *m.NetworkTCPConnections != 1 {
			t.Errorf("metrics after one fetch and one refused connect: %+v, %v; want 1 TCP connection and 1 TCP error", m, err)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		res := runIn(t, off, sh(`ls /sys/class/net; timeout 5 wget -q -O- `+hi+`; echo "fetch=$?"`))
		if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != "lo" || got[1] != "fetch=1" {
			t.Errorf("want only lo and a failed fetch, got:\n%s%s", res.Stdout, res.Stderr)
		}
		if off.Info().Runtime.Network != nil {
			t.Errorf("a box without a network reports one: %+v", off.Info().Runtime.Network)
		}
		if _, err := off.NetworkStats(context.Background()); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("network stats of a box without a network: %v", err)
		}
	})

	t.Run("published ports", func(t *testing.T) {
		ctx := context.Background()
		srv, err := pub.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c", inBoxServer}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if res := runIn(t, pub, sh("for i in $(seq 200); do [ -e /tmp/ready ] && exit 0; sleep 0.1; done; exit 1")); res.Code != 0 {
			t.Fatal("the server in the box did not start")
		}
		ports := pub.Info().Runtime.Network.Ports
		if len(ports) != 2 || ports[0].HostPort == 0 || ports[1].HostPort == 0 || ports[0].HostIP != "127.0.0.1" {
			t.Fatalf("ports as bound: %+v", ports)
		}
		tcpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0].HostPort)
		c, err := net.DialTimeout("tcp", tcpAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("ping"))
		got, _ := readAll(c)
		c.Close()
		if got != "tcp:ping" {
			t.Errorf("tcp through %s: %q", tcpAddr, got)
		}
		u, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", ports[1].HostPort))
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		buf := make([]byte, 100)
		var reply string
		for i := 0; i < 10 && reply == ""; i++ { // UDP may drop the first while the flow is set up
			u.Write([]byte("ping"))
			u.SetReadDeadline(time.Now().Add(time.Second))
			if k, err := u.Read(buf); err == nil {
				reply = string(buf[:k])
			}
		}
		if reply != "udp:ping" {
			t.Errorf("udp through port %d: %q", ports[1].HostPort, reply)
		}

		// Box to box: the shared box cannot reach this one's published port
		// through the host.
		res := runIn(t, shared, sh(fmt.Sprintf("echo x | nc -w 3 host.boxlite.internal %d; echo rc=$?", ports[0].HostPort)))
		if strings.Contains(string(res.Stdout), "tcp:") {
			t.Errorf("a box reached another box's published port:\n%s", res.Stdout)
		}
		if log, _ := os.ReadFile(filepath.Join(shared.Info().Dir, "shim.log")); !strings.Contains(string(log), "a box's published port") {
			t.Errorf("the shared box's log does not say why it was refused")
		}

		// A port in use is a typed error naming it, before anything boots.
		_, err = boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithPorts(boxlite.Port{HostPort: ports[0].HostPort, GuestPort: 80}))
		if !errors.Is(err, errdefs.ErrAlreadyExists) || !strings.Contains(err.Error(), fmt.Sprint(ports[0].HostPort)) {
			t.Errorf("publishing a port in use: %v", err)
		}

		// Stopping the box frees its ports and ends its stack.
		stack := proc.ChildrenNamed(pub.Info().Runtime.ShimPid, "boxlite-net")
		if err := pub.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for _, pid := range stack {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				t.Errorf("network stack %d still there after the box stopped", pid)
			}
		}
		ln, err := net.Listen("tcp", tcpAddr)
		if err != nil {
			t.Errorf("after stop, %s is still taken: %v", tcpAddr, err)
		} else {
			ln.Close()
		}
	})

	t.Run("bad specs", func(t *testing.T) {
		ctx := context.Background()
		for _, opt := range []boxlite.BoxOption{
			boxlite.WithNetwork(boxlite.NetworkSpec{Mode: "bridge"}),
			boxlite.WithNetwork(boxlite.NetworkSpec{AllowNet: []string{"http://x"}}),
			boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled, AllowNet: []string{"x.com"}}),
			boxlite.WithPorts(boxlite.Port{GuestPort: 0}),
			boxlite.WithPorts(boxlite.Port{GuestPort: 80, Protocol: "sctp"}),
		} {
			if _, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", opt); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("want invalid argument, got %v", err)
			}
		}
	})
}

func readAll(c net.Conn) (string, error) {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		k, err := c.Read(buf)
		sb.Write(buf[:k])
		if err != nil {
			return sb.String(), err
		}
	}
}
