package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/boxlite/boxlite"
)

// pauseBench (bench -pause) measures pausing and resuming in one home, in
// rounds so that the machine's load weighs on all alike: how long a pause
// takes; a resume to the first exec result (an exec on the paused box,
// which resumes it) against a cold boot (a stopped box started again) and
// a template start (a new box of the same image) to theirs; and what a
// paused box holds: its processes (none), its host memory (none) and the
// disk of its state against the memory its guest had touched.
func pauseBench() error {
	ctx := context.Background()
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		return err
	}
	defer done()
	exec := func(b *boxlite.Box) error { return runTrue(ctx, b) }
	first, err := rt.Create(ctx, "alpine:latest") // makes the template
	if err != nil {
		return err
	}
	if err := exec(first); err != nil {
		return err
	}
	defer first.Remove(ctx, true)
	var pause, saved, resume, cold, warm, fork1, fork10 []time.Duration
	var stateMiB, touchedMiB, guestUsedMiB, pausedProcs []float64
	for range boots {
		// A template start, to its first exec result.
		t0 := time.Now()
		b, err := rt.Create(ctx, "alpine:latest", boxlite.WithAutoRemove(false))
		if err != nil {
			return err
		}
		if err := exec(b); err != nil {
			return err
		}
		warm = append(warm, time.Since(t0))
		if s := b.Info().Runtime.Start; s != "template" {
			return fmt.Errorf("a box started by %q, want template", s)
		}
		// The guest touches some memory, as a box at work does.
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c",
			"head -c 32m /dev/urandom > /tmp/blob; awk '/MemTotal/{t=$2} /MemFree/{f=$2} END{print (t-f)/1024}' /proc/meminfo"}})
		if err != nil {
			return err
		}
		var used float64
		fmt.Sscan(strings.TrimSpace(string(res.Stdout)), &used)
		guestUsedMiB = append(guestUsedMiB, used)
		i := b.Info()
		kinds, err := smapsByKind(i.Runtime.VMMPid, i.Config.MemoryMiB)
		if err != nil {
			return err
		}
		touchedMiB = append(touchedMiB, float64(kinds["guest RAM"])/1024)
		// Forks of the running box, to every fork's first exec result.
		for _, n := range []int{1, 10} {
			d, err := forkToExec(ctx, b, n, exec)
			if err != nil {
				return err
			}
			if n == 1 {
				fork1 = append(fork1, d)
			} else {
				fork10 = append(fork10, d)
			}
		}
		// Pause.
		t0 = time.Now()
		p, err := b.Pause(ctx)
		if err != nil {
			return err
		}
		pause = append(pause, time.Since(t0))
		saved = append(saved, time.Duration(p.SaveMs*float64(time.Millisecond)))
		pausedProcs = append(pausedProcs, float64(len(boxProcs(i.Dir, i.Runtime.ShimPid, i.Runtime.VMMPid))))
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(i.Dir, "pause.state"), &st); err != nil {
			return err
		}
		stateMiB = append(stateMiB, float64(st.Blocks*512)/(1<<20))
		// Resume to the first exec result: the exec resumes it.
		t0 = time.Now()
		if err := exec(b); err != nil {
			return err
		}
		resume = append(resume, time.Since(t0))
		if s := b.Info().Runtime.Start; s != "resume" {
			return fmt.Errorf("a paused box came back by %q, want resume", s)
		}
		// A cold boot of the same box, to its first exec result.
		if err := b.Stop(ctx); err != nil {
			return err
		}
		t0 = time.Now()
		if err := b.Start(ctx); err != nil {
			return err
		}
		if err := exec(b); err != nil {
			return err
		}
		cold = append(cold, time.Since(t0))
		if s := b.Info().Runtime.Start; s != "boot" {
			return fmt.Errorf("a stopped box started by %q, want boot", s)
		}
		b.Remove(ctx, true)
	}
	rec.add("pause (the call, to the box's last process gone)", msf(median(pause)), "ms", nil)
	rec.add("  of it, VM stopped to state synced (the shim)", msf(median(saved)), "ms", nil)
	rec.vs("resume to first exec result", msf(median(resume)), "ms", "cold boot to first exec result", msf(median(cold)), nil)
	rec.vs("resume to first exec result ", msf(median(resume)), "ms", "template start to first exec result", msf(median(warm)), nil)
	rec.vs("fork of 1 to its first exec result", msf(median(fork1)), "ms", "cold boot to first exec result", msf(median(cold)), nil)
	rec.vs("fork of 10 to every fork's first exec result", msf(median(fork10)), "ms", "cold boot to first exec result", msf(median(cold)), nil)
	rec.add("processes of a paused box (so host RSS 0)", medianF(pausedProcs), "", nil)
	rec.vs("disk of a paused box's state", medianF(stateMiB), "MiB", "guest RAM the VMM had mapped (Rss)", medianF(touchedMiB), nil)
	rec.vs("disk of a paused box's state ", medianF(stateMiB), "MiB", "guest's MemTotal - MemFree", medianF(guestUsedMiB), nil)
	return nil
}

// runTrue runs `true` in b: an exec's round trip, or the first exec
// result after a start or resume.
func runTrue(ctx context.Context, b *boxlite.Box) error {
	_, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}})
	return err
}

// forkToExec forks b n times and runs exec in every fork at once: the time
// from the Fork call to the last fork's exec result. The forks are removed.
func forkToExec(ctx context.Context, b *boxlite.Box, n int, exec func(*boxlite.Box) error) (time.Duration, error) {
	t0 := time.Now()
	forks, err := b.Fork(ctx, n, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, f := range forks {
			f.Remove(ctx, true)
		}
	}()
	errs := make(chan error, len(forks))
	for _, f := range forks {
		go func() { errs <- exec(f) }()
	}
	for range forks {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	d := time.Since(t0)
	if s := forks[0].Info().Runtime.Start; s != "resume" {
		return 0, fmt.Errorf("a fork came up by %q, want resume", s)
	}
	return d, nil
}

// boxProcs lists the live processes of a box: those whose command line
// names its directory, and the pids its last run reported.
func boxProcs(dir string, pids ...int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name())
		}
	}
	for _, pid := range pids {
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			out = append(out, fmt.Sprint(pid))
		}
	}
	return out
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
