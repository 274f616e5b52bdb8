package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// many starts n boxes (128 MiB each) at once in one process, while a box
// that is already running answers an exec of `true` every 100 ms; then each
// new box answers an exec. Once all are up and idle it times an exec of
// `true` in each of them in turn (against the same in the first box alone,
// before the others started), records the host memory per box (RSS and PSS
// of shim, QEMU and network stack) and removes them all.
func many(n int) error {
	ctx, rt, done, err := timedImageRuntime(max(10*time.Minute, time.Duration(n)*12*time.Second))
	if err != nil {
		return err
	}
	defer done()
	probe, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		return err
	}
	defer probe.Remove(context.Background(), true)
	execTrue := func(b *boxlite.Box) (time.Duration, error) {
		ectx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		t0 := time.Now()
		_, err := b.Run(ectx, boxlite.Command{Argv: []string{"true"}})
		return time.Since(t0), err
	}
	var idle []time.Duration
	for range 20 {
		d, err := execTrue(probe)
		if err != nil {
			return err
		}
		idle = append(idle, d)
	}
	time.Sleep(settle)
	alone := boxMem([]*boxlite.Box{probe})

	stop := make(chan struct{})
	var busy []time.Duration
	var probeErr error
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			d, err := execTrue(probe)
			if err != nil {
				probeErr = err
				return
			}
			busy = append(busy, d)
		}
	}()
	start := time.Now()
	boxes := make([]*boxlite.Box, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range boxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
			if err == nil {
				var res *boxlite.ExecResult
				if res, err = b.Run(ctx, boxlite.Command{Argv: []string{"echo", fmt.Sprint(i)}}); err == nil && string(res.Stdout) != fmt.Sprintf("%d\n", i) {
					err = fmt.Errorf("box %d answered %q", i, res.Stdout)
				}
			}
			boxes[i], errs[i] = b, err
		}()
	}
	wg.Wait()
	up := time.Since(start)
	close(stop)
	pwg.Wait()
	defer func() {
		var rwg sync.WaitGroup
		for _, b := range boxes {
			if b != nil {
				rwg.Add(1)
				go func() { defer rwg.Done(); b.Remove(context.Background(), true) }()
			}
		}
		rwg.Wait()
	}()
	failed := 0
	var ok []*boxlite.Box
	for i, b := range boxes {
		if errs[i] != nil {
			failed++
			if failed <= 3 {
				fmt.Printf("  box %d: %v\n", i, errs[i])
			}
			continue
		}
		ok = append(ok, b)
	}
	if probeErr != nil {
		return fmt.Errorf("exec into the running box while the others started: %v", probeErr)
	}
	// All idle: an exec of true in each box in turn, twice round.
	time.Sleep(settle)
	var among []time.Duration
	for range 2 {
		for _, b := range ok {
			d, err := execTrue(b)
			if err != nil {
				return fmt.Errorf("exec among %d idle boxes: %v", len(ok), err)
			}
			among = append(among, d)
		}
	}
	time.Sleep(settle)
	all := boxMem(append(ok, probe))

	sortD := func(d []time.Duration) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	sortD(idle)
	sortD(busy)
	sortD(among)
	p := func(d []time.Duration, q int) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)*q/100, len(d)-1)]
	}
	what := fmt.Sprintf("%d boxes at once (128 MiB each)", n)
	rec.add(what+": all up and answering after", msf(up), "ms", nil)
	rec.add(what+": failed", float64(failed), "boxes", nil)
	rec.vs(what+": exec of true in a running box meanwhile, p50", msf(p(busy, 50)), "ms", "alone", msf(p(idle, 50)), nil)
	rec.vs(what+": exec of true in a running box meanwhile, p99", msf(p(busy, 99)), "ms", "alone p50", msf(p(idle, 50)), nil)
	rec.add(what+": exec of true among them once idle, p50", msf(p(among, 50)), "ms", atMost(50))
	rec.vs(what+": exec of true among them once idle, p50 against one box", msf(p(among, 50)), "ms", "one box alone", msf(p(idle, 50)), nil)
	rec.vs(what+": exec of true among them once idle, p99", msf(p(among, 99)), "ms", "one box alone p50", msf(p(idle, 50)), nil)
	memRows(what+": host memory per box", all, "one box alone", alone)
	return nil
}

// procMem is the memory (MiB) of one kind of a box's processes.
type procMem struct{ rss, pss float64 }

// boxesMem is the memory per box of a set of boxes, by process, each the
// mean over the boxes.
type boxesMem struct{ shim, vmm, net procMem }

func (m boxesMem) total() procMem {
	return procMem{m.shim.rss + m.vmm.rss + m.net.rss, m.shim.pss + m.vmm.pss + m.net.pss}
}

// boxMem reads smaps_rollup of each box's shim, QEMU and network stack.
// Pss splits the pages the boxes share (QEMU's binary and libraries, a
// template's memory) among them; Rss counts them in every box.
func boxMem(boxes []*boxlite.Box) boxesMem {
	var m boxesMem
	add := func(pm *procMem, pid int) {
		pm.rss += smapsMiB(pid, "Rss:")
		pm.pss += smapsMiB(pid, "Pss:")
	}
	for _, b := range boxes {
		i := b.Info().Runtime
		add(&m.shim, i.ShimPid)
		add(&m.vmm, i.VMMPid)
		add(&m.net, childNamed(i.ShimPid, "boxlite-net"))
	}
	n := float64(max(len(boxes), 1))
	for _, pm := range []*procMem{&m.shim, &m.vmm, &m.net} {
		pm.rss /= n
		pm.pss /= n
	}
	return m
}

// memRows records m per process next to base (Pss per box: goal 40 MiB).
func memRows(what string, m boxesMem, baseline string, base boxesMem) {
	t, bt := m.total(), base.total()
	rec.add(what+", Pss", t.pss, "MiB", atMost(40))
	rec.vs(what+", Pss against "+baseline, t.pss, "MiB", baseline, bt.pss, nil)
	rec.vs(what+", Rss", t.rss, "MiB", baseline, bt.rss, nil)
	for _, x := range []struct {
		name    string
		pm, bpm procMem
	}{{"shim", m.shim, base.shim}, {"QEMU", m.vmm, base.vmm}, {"network stack", m.net, base.net}} {
		rec.vs("  "+x.name+" Pss", x.pm.pss, "MiB", baseline, x.bpm.pss, nil)
		rec.vs("  "+x.name+" Rss", x.pm.rss, "MiB", baseline, x.bpm.rss, nil)
	}
}

// spin measures how a box that spins its CPU affects another box: exec of
// `true` in one box while the other runs a busy loop, against the same
// before the loop starts (each VMM has the same cgroup CPU weight).
func spin() error {
	ctx, rt, done, err := timedImageRuntime(5 * time.Minute)
	if err != nil {
		return err
	}
	defer done()
	quiet, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		return err
	}
	busy, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		return err
	}
	p50 := func() (time.Duration, error) {
		var d []time.Duration
		for range 40 {
			t0 := time.Now()
			if _, err := quiet.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
				return 0, err
			}
			d = append(d, time.Since(t0))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2], nil
	}
	before, err := p50()
	if err != nil {
		return err
	}
	loop, err := busy.Exec(ctx, boxlite.Command{Argv: []string{"sh", "-c", "while :; do :; done"}})
	if err != nil {
		return err
	}
	defer loop.Close()
	time.Sleep(time.Second)
	during, err := p50()
	if err != nil {
		return err
	}
	rec.vs("a box spinning its CPU: exec of true in another box, p50", msf(during), "ms", "before", msf(before), nil)
	return nil
}

// timedImageRuntime is imageRuntime under a context of timeout; done also
// cancels the context.
func timedImageRuntime(timeout time.Duration) (context.Context, *boxlite.Runtime, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, rt, func() { done(); cancel() }, nil
}

// imageRuntime is a fresh runtime (with opts) with the test image loaded.
func imageRuntime(ctx context.Context, opts ...boxlite.Option) (*boxlite.Runtime, func(), error) {
	rt, done, err := freshRuntime(opts...)
	if err != nil {
		return nil, nil, err
	}
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		done()
		return nil, nil, err
	}
	return rt, done, nil
}
