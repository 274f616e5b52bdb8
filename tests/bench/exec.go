package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Exec and stdout figures (issue 27): rounds that interleave the box's
// figure with its in-guest baseline, so that the load of this shared
// machine weighs on both alike.
const (
	execRounds   = 5
	execPerRound = 40  // execs of true timed from the host per round
	spawnsRound  = 200 // spawns of true timed in the guest per round
	// stdoutBlocks of 64 KiB (dd: busybox head copies so slowly under TCG
	// that it, not the channel, would be measured) per round.
	stdoutBlocks = 1024
)

// execBench is `bench -exec`: the exec and stdout rows alone, in a fresh box.
func execBench() error {
	ctx := context.Background()
	rt, done, err := freshRuntime()
	if err != nil {
		return err
	}
	defer done()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		return err
	}
	box, err := boxtest.CreateStarted(ctx, rt, "alpine:latest")
	if err != nil {
		return err
	}
	defer box.Remove(ctx, true)
	return execRows(ctx, box)
}

// execRows records the exec round trip of `true` (p50, p90 of every exec)
// against a spawn+wait of true in the guest, and stdout into the host (p50,
// p90 of the rounds: the slower tail) against the same bytes through a pipe
// to cat in the guest.
func execRows(ctx context.Context, box *boxlite.Box) error {
	for range 5 { // the agent's paths translated once (TCG) before timing
		if _, err := box.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return err
		}
	}
	const size = stdoutBlocks << 16
	dd := fmt.Sprintf("dd if=/dev/zero bs=65536 count=%d 2>/dev/null", stdoutBlocks)
	var rtt, spawn []time.Duration
	var host, channel, pipe []float64 // MB/s per round
	for r := range execRounds {
		for range execPerRound {
			start := time.Now()
			if _, err := box.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
				return err
			}
			rtt = append(rtt, time.Since(start))
		}
		s, err := guestSpawn(ctx, box, spawnsRound)
		if err != nil {
			return err
		}
		spawn = append(spawn, s)
		// The same bytes with the exec lane and without it
		// (boxlite.ExecLaneEnv=off), alternating which goes first.
		for i := range 2 {
			lane := (i+r)%2 == 0
			mbs, err := stdoutRate(ctx, box, dd, size, lane)
			if err != nil {
				return err
			}
			if lane {
				host = append(host, mbs)
			} else {
				channel = append(channel, mbs)
			}
		}
		ns, err := guestNs(ctx, box, dd+" | cat >/dev/null", 1)
		if err != nil {
			return err
		}
		pipe = append(pipe, float64(size)/1e6/(float64(ns)/1e9))
	}
	base := median(spawn)
	rec.vs("exec of true, p50", msf(pctOf(rtt, 50)), "ms", "spawn+wait of true in the guest, median of rounds", msf(base), atMost(1.2))
	rec.vs("exec of true, p90", msf(pctOf(rtt, 90)), "ms", "spawn+wait of true in the guest, slowest round", msf(slowest(spawn)), nil)
	rec.vs("stdout into the host, p50 of rounds", quantileF(host, 50), "MB/s", "a pipe to cat in the guest, p50",
		quantileF(pipe, 50), atLeast(0.5))
	rec.vs("stdout into the host without the exec lane, p50 of rounds", quantileF(channel, 50), "MB/s", "a pipe to cat in the guest, p50",
		quantileF(pipe, 50), nil)
	// Throughput's p90 is the slower tail: the 10th percentile of the rates.
	rec.vs("stdout into the host, p90 (slow tail)", quantileF(host, 10), "MB/s", "a pipe to cat in the guest, same tail",
		quantileF(pipe, 10), nil)
	return nil
}

// stdoutRate times size bytes of stdout of sh -c dd into the host, in
// MB/s, with the exec lane or (lane false) without it.
func stdoutRate(ctx context.Context, box *boxlite.Box, dd string, size int, lane bool) (float64, error) {
	if !lane {
		os.Setenv(boxlite.ExecLaneEnv, "off")
		defer os.Unsetenv(boxlite.ExecLaneEnv)
	}
	start := time.Now()
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", dd}, OutputLimit: int64(size)})
	if err != nil || len(res.Stdout) != size {
		return 0, fmt.Errorf("stdout run (lane %v): %d of %d bytes: %v", lane, len(res.Stdout), size, err)
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

// slowest is the largest duration.
func slowest(d []time.Duration) time.Duration { return pctOf(d, 100) }

// quantileF is percentile p (0-100) of unsorted values, nearest rank.
func quantileF(v []float64, p int) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
