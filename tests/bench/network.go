package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// network prints the box network's figures (bench -net), each against a
// baseline of the same run: TCP throughput box -> host and host -> box
// (through a published port) against host loopback; connection setup and DNS
// lookups against the same loop on the guest's own loopback; the boot cost
// of the NIC against a box with the network disabled.
func network() error {
	ctx := context.Background()
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		return err
	}
	defer done()

	// Boot cost of the NIC: alternate, so drift hits both alike.
	var on, off []time.Duration
	for i := range 4 {
		spec := boxlite.NetworkSpec{Mode: boxlite.NetworkDisabled}
		if i%2 == 0 {
			spec.Mode = boxlite.NetworkEnabled
		}
		start := time.Now()
		b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithNetwork(spec))
		if err != nil {
			return err
		}
		if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return err
		}
		d := time.Since(start)
		b.Remove(ctx, true)
		if spec.Mode == boxlite.NetworkEnabled {
			on = append(on, d)
		} else {
			off = append(off, d)
		}
	}
	rec.vs("network: create to first exec with a NIC", msf(median(on)), "ms", "network disabled", msf(median(off)), nil)

	// Throughput from a python:slim box: busybox nc writes 1 KiB at a
	// time, which measures nc, not the network.
	py := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if py == "" {
		return fmt.Errorf("BOXLITE_TEST_PYTHON_IMAGE is not set (make bench sets it)")
	}
	imgs, err := rt.Images().Load(ctx, py)
	if err != nil {
		return err
	}
	pyBox, err := boxtest.CreateStarted(ctx, rt, imgs[0].Name, boxlite.WithPorts(boxlite.Port{GuestPort: 5001}))
	if err != nil {
		return err
	}
	defer pyBox.Remove(ctx, true)
	const size = 256 << 20

	// Host loopback: the baseline for both directions.
	loop, err := loopbackMBps(size)
	if err != nil {
		return err
	}

	// Box -> host: the box sends to a host listener through the NAT.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	got := make(chan float64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		start := time.Now()
		n, _ := io.Copy(io.Discard, c)
		got <- float64(n) / 1e6 / time.Since(start).Seconds()
		c.Close()
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	send := fmt.Sprintf(`import socket
s = socket.create_connection(("host.boxlite.internal", %d))
b = bytes(1 << 20)
for _ in range(%d): s.sendall(b)
s.close()`, port, size>>20)
	if res, err := pyBox.Run(ctx, boxlite.Command{Argv: []string{"python3", "-c", send}, Timeout: 5 * time.Minute}); err != nil || res.Code != 0 {
		return fmt.Errorf("box -> host: %v %s", err, res.Stderr)
	}
	up := <-got
	rec.vs("network: TCP box -> host", up, "MB/s", "host loopback", loop, nil)

	// Host -> box through the published port.
	sink, err := pyBox.Exec(ctx, boxlite.Command{Argv: []string{"python3", "-c", `import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("0.0.0.0", 5001)); l.listen(1)
open("/tmp/listening", "w").close()
c, _ = l.accept()
while c.recv(1 << 20): pass
c.close()`}})
	if err != nil {
		return err
	}
	defer sink.Close()
	if res, err := pyBox.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "for i in $(seq 100); do [ -e /tmp/listening ] && exit 0; sleep 0.1; done; exit 1"}}); err != nil || res.Code != 0 {
		return fmt.Errorf("the sink in the box did not start")
	}
	hp := pyBox.Info().Runtime.Network.Ports[0].HostPort
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", hp))
	if err != nil {
		return err
	}
	start := time.Now()
	n, _ := io.CopyN(c, zeros{}, size)
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c) // until the sink closes
	c.Close()
	down := float64(n) / 1e6 / time.Since(start).Seconds()
	rec.vs("network: TCP host -> box through a published port", down, "MB/s", "host loopback", loop, nil)

	box, err := boxtest.CreateStarted(ctx, rt, "alpine:latest")
	if err != nil {
		return err
	}
	defer box.Remove(ctx, true)

	// Connection setup and DNS, per operation, against the guest's own
	// loopback (the same nc and loop, no NAT).
	const ops = 20
	srv, err := box.Exec(ctx, boxlite.Command{Argv: []string{"nc", "-ll", "-p", "7000", "-e", "true"}})
	if err != nil {
		return err
	}
	defer srv.Close()
	time.Sleep(300 * time.Millisecond)
	perOp := func(script string) (time.Duration, error) {
		loopScript := fmt.Sprintf("for i in $(seq %d); do %s; done", ops, script)
		ns, err := guestNs(ctx, box, loopScript, 1)
		return time.Duration(ns / ops), err
	}
	// A host listener that accepts and closes.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln2.Close()
	go func() {
		for {
			c, err := ln2.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	natConn, err := perOp(fmt.Sprintf("echo | nc host.boxlite.internal %d", ln2.Addr().(*net.TCPAddr).Port))
	if err != nil {
		return err
	}
	localConn, err := perOp("echo | nc 127.0.0.1 7000")
	if err != nil {
		return err
	}
	rec.vs("network: TCP connect+close to the host", msf(natConn), "ms", "to the guest's own loopback", msf(localConn), nil)
	dns, err := perOp("nslookup -type=a host.boxlite.internal >/dev/null")
	if err != nil {
		return err
	}
	spawn, err := perOp("true")
	if err != nil {
		return err
	}
	rec.vs("network: DNS lookup (busybox nslookup)", msf(dns), "ms", "spawning true in the guest", msf(spawn), nil)
	return nil
}

// loopbackMBps sends size bytes over host loopback TCP.
func loopbackMBps(size int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	done := make(chan float64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		start := time.Now()
		k, _ := io.Copy(io.Discard, c)
		done <- float64(k) / 1e6 / time.Since(start).Seconds()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	io.CopyN(c, zeros{}, size)
	c.Close()
	return <-done, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
