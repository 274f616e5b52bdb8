package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/boxlite/boxlite"
)

// pausedBench (bench -paused N) puts N boxes of 128 MiB to sleep on this
// machine, one at a time (template start, an exec, a pause), and reports
// what they hold: processes (none), disk per paused box against the memory
// the guest had touched, the host's free disk; then the resume of a random
// paused box to its first exec result against a cold boot and a template
// start of the same image, measured in rounds among the sleeping boxes, and
// a memory snapshot's create and restore-to-exec.
func pausedBench(n int) error {
	ctx := context.Background()
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		return err
	}
	defer done()
	exec := func(b *boxlite.Box) error { return runTrue(ctx, b) }
	opts := []boxlite.BoxOption{boxlite.WithMemoryMiB(128), boxlite.WithAutoRemove(false)}
	first, err := rt.Create(ctx, "alpine:latest", opts...) // makes the template
	if err != nil {
		return err
	}
	defer first.Remove(ctx, true)
	if err := exec(first); err != nil {
		return err
	}
	var boxes []*boxlite.Box
	defer func() {
		for _, b := range boxes {
			b.Remove(ctx, true)
		}
	}()
	t0 := time.Now()
	var stateBytes, diskBytes int64
	var pauses []time.Duration
	for i := range n {
		b, err := rt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			return fmt.Errorf("box %d: %w", i, err)
		}
		boxes = append(boxes, b)
		if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", fmt.Sprintf("echo %d > /tmp/id", i)}}); err != nil {
			return fmt.Errorf("box %d: %w", i, err)
		}
		p0 := time.Now()
		if _, err := b.Pause(ctx); err != nil {
			return fmt.Errorf("box %d: pause: %w", i, err)
		}
		pauses = append(pauses, time.Since(p0))
		dir := b.Info().Dir
		stateBytes += allocated(filepath.Join(dir, "pause.state"))
		diskBytes += allocated(filepath.Join(dir, "disk.ext4"))
		if (i+1)%50 == 0 {
			fmt.Fprintf(os.Stderr, "bench: %d boxes paused in %s\n", i+1, time.Since(t0).Round(time.Second))
		}
	}
	all := time.Since(t0)
	var procs int
	for _, b := range boxes {
		procs += len(boxProcs(b.Info().Dir))
	}
	var fs syscall.Statfs_t
	syscall.Statfs(rt.Home(), &fs)
	rec.add(fmt.Sprintf("boxes paused on this machine (128 MiB each), one at a time in %.0f s", all.Seconds()), float64(n), "", nil)
	rec.add("  processes of all the paused boxes", float64(procs), "", nil)
	rec.add("  pause of one, median", msf(median(pauses)), "ms", nil)
	rec.add("  disk per paused box: its saved state", float64(stateBytes)/float64(n)/(1<<20), "MiB", nil)
	rec.add("  disk per paused box: its disk", float64(diskBytes)/float64(n)/(1<<20), "MiB", nil)
	rec.add("  host disk still free", float64(fs.Bavail)*float64(fs.Bsize)/(1<<30), "GiB", nil)

	// Resume a random sleeping box, in rounds with the baselines.
	var resume, cold, warm []time.Duration
	for range 5 {
		b := boxes[rand.IntN(len(boxes))]
		r0 := time.Now()
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"cat", "/tmp/id"}})
		if err != nil {
			return err
		}
		resume = append(resume, time.Since(r0))
		if s := b.Info().Runtime.Start; s != "resume" {
			return fmt.Errorf("a paused box came back by %q (said %q)", s, res.Stdout)
		}
		if _, err := b.Pause(ctx); err != nil {
			return err
		}
		w0 := time.Now()
		w, err := rt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			return err
		}
		if err := exec(w); err != nil {
			return err
		}
		warm = append(warm, time.Since(w0))
		if err := w.Stop(ctx); err != nil {
			return err
		}
		c0 := time.Now()
		if err := w.Start(ctx); err != nil {
			return err
		}
		if err := exec(w); err != nil {
			return err
		}
		cold = append(cold, time.Since(c0))
		w.Remove(ctx, true)
	}
	rec.vs(fmt.Sprintf("resume of a random one of %d paused boxes to first exec result", n), msf(median(resume)), "ms", "cold boot to first exec result", msf(median(cold)), nil)
	rec.vs(fmt.Sprintf("resume of a random one of %d paused boxes to first exec result ", n), msf(median(resume)), "ms", "template start to first exec result", msf(median(warm)), nil)

	// A memory snapshot of a running box, and its restore to an exec.
	b := boxes[0]
	if err := exec(b); err != nil {
		return err
	}
	var create, restore []time.Duration
	for i := range 3 {
		s0 := time.Now()
		if _, err := b.CreateSnapshotWith(ctx, fmt.Sprint("m", i), boxlite.SnapshotOptions{Memory: true}); err != nil {
			return err
		}
		create = append(create, time.Since(s0))
		if err := b.Stop(ctx); err != nil {
			return err
		}
		r0 := time.Now()
		if err := b.RestoreSnapshot(ctx, fmt.Sprint("m", i)); err != nil {
			return err
		}
		if err := exec(b); err != nil {
			return err
		}
		restore = append(restore, time.Since(r0))
	}
	rec.vs("memory snapshot of a running box (the call)", msf(median(create)), "ms", "pause of one", msf(median(pauses)), nil)
	rec.vs("memory snapshot restore of a stopped box to first exec result", msf(median(restore)), "ms", "cold boot to first exec result", msf(median(cold)), nil)
	return nil
}

// allocated is what the file at path takes on the host.
func allocated(path string) int64 {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}
