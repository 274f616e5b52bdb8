package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// tunnelServers serves, on the box's loopback only, HTTP on 8000 (the
// working directory) and on 9000 an echo that answers once the client has
// half-closed: it reads to EOF, then sends everything back and closes.
const tunnelServers = `
import http.server, socket, threading, os
os.chdir("/srv")
h = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=h.serve_forever, daemon=True).start()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000)); s.listen(16)
def echo(c):
    data = b""
    while True:
        b = c.recv(65536)
        if not b: break
        data += b
    c.sendall(data); c.close()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
`

// startTunnelServers boots a python box with no network and starts the
// servers; they run as long as the returned execution.
func startTunnelServers(t *testing.T, ctx context.Context) *boxlite.Box {
	t.Helper()
	img := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if img == "" {
		t.Fatal("BOXLITE_TEST_PYTHON_IMAGE is not set: the tunnel test needs the python image (make images)")
	}
	if _, err := rt.Images().Load(ctx, img); err != nil {
		t.Fatal(err)
	}
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim", boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(context.Background()) })
	runIn(t, b, sh("mkdir -p /srv && echo tunnel-page > /srv/index.html"))
	e, err := b.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c", tunnelServers}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	line := make([]byte, 6)
	if _, err := io.ReadFull(e.Stdout, line); err != nil || string(line) != "ready\n" {
		res, _ := io.ReadAll(e.Stderr)
		t.Fatalf("servers: %q %v %s", line, err, res)
	}
	return b
}

// TestTunnel: a box without a network serves a host client through a
// forwarder (TCP and Unix), a raw connection carries a megabyte each way
// with half-close, and a port where nothing listens fails that tunnel only.
func TestTunnel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := startTunnelServers(t, ctx)

	// The box has only lo.
	if res := runIn(t, b, sh("cat /proc/net/dev")); strings.Contains(string(res.Stdout), "eth0") {
		t.Fatalf("box has a NIC: %s", res.Stdout)
	}

	// connect(): a megabyte there, the half-close, a megabyte back.
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	c, err := b.DialTunnel(ctx, 9000)
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil || <-werr != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo through the tunnel: %d bytes, %v", len(got), err)
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("tunnel stream did not end after both sides closed")
	}
	if c.Err() != nil {
		t.Fatalf("tunnel ended with %v", c.Err())
	}
	c.Close()

	// forward(): an HTTP client on the host, over TCP and over a Unix socket.
	fw, err := b.ForwardTunnel(ctx, 8000, boxlite.TCPAddress("127.0.0.1", 0))
	if err != nil {
		t.Fatal(err)
	}
	addr := fw.LocalAddr()
	if addr.Port == 0 {
		t.Fatalf("forwarder address %+v", addr)
	}
	for i := 0; i < 3; i++ { // one connection each (no keep-alive), a tunnel each
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr.String() + "/index.html")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "tunnel-page\n" {
			t.Fatalf("GET through the forwarder: %d %q", resp.StatusCode, body)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Wait(ctx); err != nil {
		t.Fatalf("wait after close: %v", err)
	}
	if _, err := net.Dial("tcp", addr.String()); err == nil {
		t.Fatal("forwarder still listening after close")
	}
	sock := filepath.Join(t.TempDir(), "box.sock")
	ufw, err := b.ForwardTunnel(ctx, 8000, boxlite.UnixAddress(sock))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://box/index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tunnel-page\n" {
		t.Fatalf("GET over the unix forwarder: %q", body)
	}
	ufw.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unix socket after close: %v", err)
	}

	// Bad listeners and ports are refused before anything listens.
	for _, a := range []boxlite.SocketAddress{boxlite.TCPAddress("localhost", 0), boxlite.UnixAddress("rel.sock")} {
		if _, err := b.ForwardTunnel(ctx, 8000, a); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("forward to %+v: %v", a, err)
		}
	}
	if _, err := b.DialTunnel(ctx, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("port 0: %v", err)
	}

	// Nothing listens: that tunnel fails, the box goes on.
	if _, err := b.DialTunnel(ctx, 9999); !errors.Is(err, errdefs.ErrUnreachable) {
		t.Fatalf("closed port: %v", err)
	}
	if res := runIn(t, b, sh("echo alive")); string(res.Stdout) != "alive\n" {
		t.Fatalf("box after a failed tunnel: %q", res.Stdout)
	}
}

// TestTunnelHostileAgent: an agent that breaks a tunnel's rules (data past
// the window, data after its eof, frames after its end) stops its box,
// which says why; the process and other boxes go on.
func TestTunnelHostileAgent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, c := range []struct{ name, want string }{
		{"tunnel-overrun", "overruns its window"},
		{"tunnel-after-eof", "after its eof"},
		{"tunnel-after-exit", "frames on streams that are not open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := filepath.Join(bin, fakeQEMUPrefix+c.name)
			if err := os.Link(exe, fake); err != nil {
				t.Fatal(err)
			}
			rt, err := boxlite.NewRuntime(boxlite.WithHome(t.TempDir()), boxlite.WithQEMU(fake))
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			loadTestImage(t, rt)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithBootTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			tc, err := b.DialTunnel(ctx, 80)
			if err == nil {
				_, err = io.ReadAll(tc)
				for deadline := time.Now().Add(20 * time.Second); err == nil && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond)
					_, err = b.Run(ctx, sh("true"))
				}
			}
			if err == nil || !strings.Contains(err.Error(), c.want) && !strings.Contains(b.Info().LastExit, c.want) {
				t.Fatalf("tunnel: %v (last exit %q); want an error naming %q", err, b.Info().LastExit, c.want)
			}
			if _, err := b.Run(ctx, sh("true")); !errors.Is(err, errdefs.ErrInvalidState) || !strings.Contains(err.Error(), "protocol violation") {
				t.Fatalf("next run: %v; want the box stopped by the violation", err)
			}
		})
	}
	if res := runIn(t, shared, sh("echo alive")); string(res.Stdout) != "alive\n" {
		t.Fatalf("shared box after the hostile agents: %q", res.Stdout)
	}
}

// fakeTunnel plays a hostile agent's side of a tunnel for the
// tunnel-* scenarios of fakeQEMU.
func fakeTunnel(w *protocol.Writer, scenario string, f protocol.Frame) {
	if f.Type != protocol.TTunnel {
		return
	}
	id := f.Stream
	send := func(t protocol.Type, body any) {
		fr, err := protocol.Encode(t, id, body)
		if err == nil {
			err = w.WriteFrame(fr)
		}
		if err != nil {
			os.Exit(0)
		}
	}
	send(protocol.TStarted, protocol.Started{})
	chunk := make([]byte, protocol.MaxChunk)
	switch scenario {
	case "tunnel-overrun":
		for i := 0; i < 64; i++ {
			w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: chunk})
		}
	case "tunnel-after-eof":
		w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("x")})
		w.WriteFrame(protocol.Frame{Type: protocol.TEOF, Stream: id})
		w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("y")})
	case "tunnel-after-exit":
		w.WriteFrame(protocol.Frame{Type: protocol.TEOF, Stream: id})
		send(protocol.TExit, protocol.Exit{})
		for i := 0; i < 100000; i++ {
			w.WriteFrame(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("x")})
		}
	}
}
