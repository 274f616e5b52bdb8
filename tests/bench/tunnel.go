package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// tunnelServers, on the box's loopback: 5001 sends tunnelBytes and closes,
// 5002 reads to EOF and closes.
const tunnelBytes = 64 << 20

var tunnelServers = fmt.Sprintf(`import socket, threading
def source(c):
    b = bytes(1 << 20)
    for _ in range(%d): c.sendall(b)
    c.close()
def sink(c):
    while c.recv(1 << 20): pass
    c.close()
def serve(port, f):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(4)
    while True:
        c, _ = l.accept(); threading.Thread(target=f, args=(c,), daemon=True).start()
threading.Thread(target=serve, args=(5001, source), daemon=True).start()
print("ready", flush=True)
serve(5002, sink)`, tunnelBytes>>20)

// tunnelBench (bench -tunnel) measures a tunnel's throughput each way in a
// box without a network, against the exec stream carrying the same bytes
// (stdout out of the box, stdin into it): both cross the agent channel.
func tunnelBench() error {
	ctx := context.Background()
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		return err
	}
	defer done()
	py := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if py == "" {
		return fmt.Errorf("BOXLITE_TEST_PYTHON_IMAGE is not set (make bench sets it)")
	}
	imgs, err := rt.Images().Load(ctx, py)
	if err != nil {
		return err
	}
	box, err := boxtest.CreateStarted(ctx, rt, imgs[0].Name, boxlite.WithNetwork(boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}))
	if err != nil {
		return err
	}
	defer box.Remove(ctx, true)
	srv, err := box.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c", tunnelServers}})
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := io.ReadFull(srv.Stdout, make([]byte, 6)); err != nil {
		return fmt.Errorf("tunnel servers: %v", err)
	}
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

	// Out of the box: the tunnel, then the exec's stdout.
	var outT, outE, inT, inE []float64
	for range 3 {
		start := time.Now()
		t, err := dialRetry(ctx, box, 5001)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, t)
		t.Close()
		if err != nil || n != tunnelBytes {
			return fmt.Errorf("tunnel out: %d bytes, %v", n, err)
		}
		outT = append(outT, mbps(n, time.Since(start)))

		start = time.Now()
		e, err := box.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c",
			fmt.Sprintf("import sys\nb = bytes(1 << 20)\nfor _ in range(%d): sys.stdout.buffer.write(b)", tunnelBytes>>20)}})
		if err != nil {
			return err
		}
		n, _ = io.Copy(io.Discard, e.Stdout)
		if _, err := e.Wait(ctx); err != nil || n != tunnelBytes {
			return fmt.Errorf("exec out: %d bytes, %v", n, err)
		}
		outE = append(outE, mbps(n, time.Since(start)))

		// Into the box: the tunnel (to EOF after the half-close), then stdin.
		start = time.Now()
		t, err = dialRetry(ctx, box, 5002)
		if err != nil {
			return err
		}
		n, err = io.CopyN(t, zeros{}, tunnelBytes)
		if err == nil {
			err = t.CloseWrite()
		}
		if err == nil {
			_, err = io.Copy(io.Discard, t) // until the sink closes
		}
		t.Close()
		if err != nil {
			return fmt.Errorf("tunnel in: %v", err)
		}
		inT = append(inT, mbps(n, time.Since(start)))

		start = time.Now()
		e, err = box.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c",
			"import sys\nwhile sys.stdin.buffer.read(1 << 20): pass"}, Stdin: true})
		if err != nil {
			return err
		}
		n, err = io.CopyN(e.Stdin, zeros{}, tunnelBytes)
		if err == nil {
			err = e.Stdin.Close()
		}
		if _, werr := e.Wait(ctx); err != nil || werr != nil {
			return fmt.Errorf("exec in: %v %v", err, werr)
		}
		inE = append(inE, mbps(n, time.Since(start)))
	}
	rec.vs("tunnel: box -> host, 64 MiB (no network in the box)", medianF(outT), "MB/s", "exec stdout of the same bytes", medianF(outE), nil)
	rec.vs("tunnel: host -> box, 64 MiB", medianF(inT), "MB/s", "exec stdin of the same bytes", medianF(inE), nil)
	return nil
}

// dialRetry dials a tunnel, waiting for the server in the box to listen.
func dialRetry(ctx context.Context, box *boxlite.Box, port int) (*boxlite.TunnelConn, error) {
	for i := 0; ; i++ {
		t, err := box.DialTunnel(ctx, port)
		if err == nil || !errors.Is(err, errdefs.ErrUnreachable) || i > 100 {
			return t, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
