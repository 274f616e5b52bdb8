package hv

import "time"

func rdtsc() uint64

// measureTSCkHz times the TSC against the monotonic clock over a few short
// windows and keeps the window whose endpoints were read most tightly, so a
// preempted sample does not skew the result. ok is false when no window was
// clean enough to trust.
func measureTSCkHz() (khz int, ok bool) {
	const (
		window = 10 * time.Millisecond
		slack  = 50 * time.Microsecond // max time between the clock reads around rdtsc
	)
	read := func() (time.Time, uint64, time.Duration) {
		a := time.Now()
		c := rdtsc()
		b := time.Now()
		return a.Add(b.Sub(a) / 2), c, b.Sub(a)
	}
	var best time.Duration = -1
	for i := 0; i < 5; i++ {
		t0, c0, e0 := read()
		time.Sleep(window)
		t1, c1, e1 := read()
		if e0 > slack || e1 > slack || c1 <= c0 {
			continue
		}
		if best >= 0 && e0+e1 >= best {
			continue
		}
		ns := t1.Sub(t0).Nanoseconds()
		if ns <= 0 {
			continue
		}
		best = e0 + e1
		khz = int((float64(c1-c0)*1e6/float64(ns) + 0.5))
		ok = true
	}
	return khz, ok && khz > 0
}
