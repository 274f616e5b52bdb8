package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

// A command printing far more than its output limit: the result keeps the
// limit's worth and says it was cut, and the host process grows by far less
// than what the box printed. (600 MB against the default 64 MiB behaves the
// same, measured in the note; under TCG it takes minutes, so the test
// prints 100 MB (dd: busybox head is slow under TCG) against 16 MiB.)
func TestLargeOutputIsCapped(t *testing.T) {
	const limit = 16 << 20
	before := vmRSSKiB(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			if kib := int64(vmRSSKiB(t)); kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := shared.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "dd if=/dev/zero bs=65536 count=1526 2>/dev/null; echo done >&2"}, OutputLimit: limit})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(res.Stdout)) != limit || !res.StdoutTruncated {
		t.Fatalf("stdout %d bytes, truncated=%v; want %d and truncated", len(res.Stdout), res.StdoutTruncated, limit)
	}
	if string(res.Stderr) != "done\n" || res.StderrTruncated || res.Code != 0 {
		t.Fatalf("stderr %q truncated=%v code %d", res.Stderr, res.StderrTruncated, res.Code)
	}
	grew := (peak.Load() - int64(before)) >> 10
	t.Logf("100 MB in %v; host RSS grew by %d MiB at most", time.Since(start).Round(time.Millisecond), grew)
	if grew > 100 {
		t.Fatalf("host RSS grew by %d MiB", grew)
	}
}
