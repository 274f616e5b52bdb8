package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// sessionBench measures persistent sessions in a python:slim box: a cell
// `pass` in a warm Python session vs. `python3 -c pass` exec'd in the same
// box, a command in a shell session vs. an exec of `true`, and the
// interpreter's memory in the guest.
func sessionBench(ctx context.Context, archive string) error {
	rt, done, err := freshRuntime()
	if err != nil {
		return err
	}
	defer done()
	imgs, err := rt.Images().Load(ctx, archive)
	if err != nil {
		return err
	}
	b, err := boxtest.CreateStarted(ctx, rt, imgs[0].Name)
	if err != nil {
		return err
	}
	defer b.Remove(ctx, true)

	start := time.Now()
	s, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	startup := time.Since(start)
	for range 5 { // warm up
		if _, err := s.Run(ctx, "pass", 0); err != nil {
			return err
		}
	}
	cells, err := timeN(50, func() error { _, err := s.Run(ctx, "pass", 0); return err })
	if err != nil {
		return err
	}
	execs, err := timeN(5, func() error {
		_, err := b.Run(ctx, boxlite.Command{Argv: []string{"python3", "-c", "pass"}})
		return err
	})
	if err != nil {
		return err
	}
	rec.vs("python session: run(\"pass\"), p50", msf(pct(cells, 50)), "ms", "`python3 -c pass` exec in the same box", msf(pct(execs, 50)), nil)
	rec.vs("python session: run(\"pass\"), p99", msf(pct(cells, 99)), "ms", "`python3 -c pass` exec in the same box", msf(pct(execs, 50)), nil)
	rec.add("python session: start", msf(startup), "ms", nil)

	rss := func(pid string) float64 { // MiB, 0 when the guest cannot tell
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", `grep VmRSS /proc/` + pid + `/status`}})
		if err != nil {
			return 0
		}
		f := strings.Fields(strings.TrimPrefix(string(res.Stdout), "VmRSS:"))
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseFloat(f[0], 64)
		return kb / 1024
	}
	bare, err := b.Run(ctx, boxlite.Command{Argv: []string{"python3", "-c", "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0], 'kB')"}})
	if err != nil {
		return err
	}
	if _, err := s.Run(ctx, "import json, re, collections", 0); err != nil {
		return err
	}
	bareKB, _ := strconv.ParseFloat(strings.Fields(string(bare.Stdout) + " 0")[0], 64)
	rec.vs("python session: interpreter VmRSS in the guest", rss(fmt.Sprint(s.Pid())), "MiB", "a bare `python3 -c`", bareKB/1024, nil)

	sh, err := b.NewShellSession(ctx, boxlite.SessionOptions{})
	if err != nil {
		return err
	}
	defer sh.Close()
	shells, err := timeN(30, func() error { _, err := sh.Exec(ctx, []string{"true"}, nil, 0); return err })
	if err != nil {
		return err
	}
	plain, err := timeN(30, func() error { _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); return err })
	if err != nil {
		return err
	}
	rec.vs("shell session: exec true, p50", msf(pct(shells, 50)), "ms", "an exec of `true` in the same box", msf(pct(plain, 50)), nil)
	rec.add("shell session: shell VmRSS in the guest", rss(fmt.Sprint(sh.Pid())), "MiB", nil)
	return nil
}

func timeN(n int, f func() error) ([]time.Duration, error) {
	d := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		d = append(d, time.Since(t0))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
