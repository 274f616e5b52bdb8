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
// new box answers an exec, and all are removed. It prints the time until all
// were up, the exec latency of the running box meanwhile (against its
// latency when idle), and the host RSS per box.
func many(n int) error {
	ctx, rt, done, err := timedImageRuntime(10 * time.Minute)
	if err != nil {
		return err
	}
	defer done()
	probe, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		return err
	}
	execTrue := func() (time.Duration, error) {
		t0 := time.Now()
		_, err := probe.Run(ctx, boxlite.Command{Argv: []string{"true"}})
		return time.Since(t0), err
	}
	var idle []time.Duration
	for range 20 {
		d, err := execTrue()
		if err != nil {
			return err
		}
		idle = append(idle, d)
	}

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
			d, err := execTrue()
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
	failed := 0
	var rss int
	for i, b := range boxes {
		if errs[i] != nil {
			failed++
			if failed <= 3 {
				fmt.Printf("  box %d: %v\n", i, errs[i])
			}
			continue
		}
		info := b.Info().Runtime
		rss += rssKB(info.ShimPid) + rssKB(info.VMMPid)
	}
	for _, b := range boxes {
		if b != nil {
			b.Remove(ctx, true)
		}
	}
	if probeErr != nil {
		return fmt.Errorf("exec into the running box while the others started: %v", probeErr)
	}
	sortD := func(d []time.Duration) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	sortD(idle)
	sortD(busy)
	p := func(d []time.Duration, q int) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)*q/100, len(d)-1)]
	}
	what := fmt.Sprintf("%d boxes at once (128 MiB each)", n)
	rec.add(what+": all up and answering after", msf(up), "ms", nil)
	rec.add(what+": failed", float64(failed), "boxes", nil)
	rec.add(what+": host RSS per box", float64(rss)/1024/float64(max(n-failed, 1)), "MiB", nil)
	rec.vs(what+": exec of true in a running box meanwhile, p50", msf(p(busy, 50)), "ms", "idle", msf(p(idle, 50)), nil)
	rec.vs(what+": exec of true in a running box meanwhile, p99", msf(p(busy, 99)), "ms", "idle p50", msf(p(idle, 50)), nil)
	return nil
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
