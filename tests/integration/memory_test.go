package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// A box that booted hands the memory its guest frees back to the host:
// after an exec that touched 200 MiB and exited, QEMU's RSS falls back
// within the free page reporting passes (2 s apart) instead of keeping the
// pages. (A box restored from a template has no balloon: see hv.RAM.)
func TestFreedGuestMemoryReturnsToHost(t *testing.T) {
	t.Parallel()
	crt, err := boxlite.NewRuntime(boxlite.WithHome(rt.Home()), boxlite.WithTemplates(false))
	if err != nil {
		t.Fatal(err)
	}
	defer crt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shared, err := boxtest.CreateStarted(ctx, crt, "alpine:latest")
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Remove(context.Background(), true)
	if s := shared.Info().Runtime.Start; s != "boot" {
		t.Fatalf("the box started by %q, want boot", s)
	}
	order := strings.TrimSpace(string(runIn(t, shared, sh("cat /sys/module/page_reporting/parameters/page_reporting_order")).Stdout))
	if order != "5" {
		t.Errorf("guest page_reporting_order %q, want 5 (128 KiB blocks)", order)
	}
	pid := shared.Info().Runtime.VMMPid
	before := vmRSSMiB(t, pid)
	res := runIn(t, shared, sh("dd if=/dev/zero of=/dev/null bs=200M count=1"))
	if res.Code != 0 {
		t.Fatalf("dd: exit %d: %s", res.Code, res.Stderr)
	}
	peak := vmRSSMiB(t, pid)
	if peak < before+100 { // some of the 200 MiB may have been resident already
		t.Fatalf("QEMU RSS %d MiB after touching 200 MiB (was %d): the test did not touch guest memory", peak, before)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := vmRSSMiB(t, pid)
		if now <= before+32 {
			t.Logf("QEMU RSS %d MiB before, %d at the peak, %d after", before, peak, now)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU RSS still %d MiB 30 s after the exec (before %d, peak %d): freed guest memory stays on the host", now, before, peak)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func vmRSSMiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
