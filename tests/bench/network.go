package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/boxlite/boxlite/core"
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
		spec := core.NetworkSpec{Mode: core.NetworkDisabled}
		if i%2 == 0 {
			spec.Mode = core.NetworkEnabled
		}
		start := time.Now()
		b, err := rt.Create(ctx, "alpine:latest", core.WithNetwork(spec))
		if err != nil {
			return err
		}
		if _, err := b.Run(ctx, core.Command{Argv: []string{"true"}}); err != nil {
			return err
		}
		d := time.Since(start)
		b.Remove(ctx, true)
		if spec.Mode == core.NetworkEnabled {
			on = append(on, d)
		} else {
			off = append(off, d)
		}
	}
	fmt.Printf("network: create to first exec with a NIC median %s vs disabled %s (ratio %.2fx)\n",
		ms(median(on)), ms(median(off)), float64(median(on))/float64(median(off)))

	box, err := rt.Create(ctx, "alpine:latest", core.WithPorts(core.Port{GuestPort: 5001}))
	if err != nil {
		return err
	}
	defer box.Remove(ctx, true)
	const size = 128 << 20

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
	send := fmt.Sprintf("dd if=/dev/zero bs=65536 count=%d 2>/dev/null | nc host.boxlite.internal %d", size>>16, port)
	if res, err := box.Run(ctx, core.Command{Argv: []string{"sh", "-c", send}, Timeout: 5 * time.Minute}); err != nil || res.Code != 0 {
		return fmt.Errorf("box -> host: %v %s", err, res.Stderr)
	}
	up := <-got
	fmt.Printf("network: TCP box -> host %.0f MB/s  (host loopback %.0f MB/s; ratio %.3fx)\n", up, loop, up/loop)

	// Host -> box through the published port.
	sink, err := box.Exec(ctx, core.Command{Argv: []string{"sh", "-c", "nc -l -p 5001 >/dev/null"}})
	if err != nil {
		return err
	}
	defer sink.Close()
	time.Sleep(500 * time.Millisecond)
	hp := box.Info().Runtime.Network.Ports[0].HostPort
	var down float64
	for try := 0; try < 20; try++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", hp))
		if err != nil {
			return err
		}
		start := time.Now()
		n, _ := io.CopyN(c, zeros{}, size)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c) // until nc exits
		c.Close()
		if n == size {
			down = float64(n) / 1e6 / time.Since(start).Seconds()
			break
		}
		time.Sleep(200 * time.Millisecond) // nc not listening yet
	}
	fmt.Printf("network: TCP host -> box through a published port %.0f MB/s  (host loopback %.0f MB/s; ratio %.3fx)\n", down, loop, down/loop)

	// Connection setup and DNS, per operation, against the guest's own
	// loopback (the same nc and loop, no NAT).
	const n = 20
	srv, err := box.Exec(ctx, core.Command{Argv: []string{"nc", "-ll", "-p", "7000", "-e", "true"}})
	if err != nil {
		return err
	}
	defer srv.Close()
	time.Sleep(300 * time.Millisecond)
	perOp := func(script string) (time.Duration, error) {
		loopScript := fmt.Sprintf("for i in $(seq %d); do %s; done", n, script)
		ns, err := guestNs(ctx, box, loopScript, 1)
		return time.Duration(ns / n), err
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
	fmt.Printf("network: TCP connect+close to the host %s each  (to the guest's own loopback: %s; ratio %.2fx)\n",
		ms(natConn), ms(localConn), float64(natConn)/float64(localConn))
	dns, err := perOp("nslookup -type=a host.boxlite.internal >/dev/null")
	if err != nil {
		return err
	}
	spawn, err := perOp("true")
	if err != nil {
		return err
	}
	fmt.Printf("network: DNS lookup (busybox nslookup) %s each  (spawning true in the guest: %s)\n", ms(dns), ms(spawn))
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
