package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

// TestWarmPool, in a home of its own: a runtime with a pool of two boxes
// hands them over on Create of their shape (each a machine of its own:
// hostname, boot id, machine id, RNG; its own disk, its own name and
// record; one renamed at the hand-over, one not), refills the pool behind them, starts a box that cannot be
// pooled (a published port) as usual, hides its pool boxes from List and
// Get, and removes them when it closes.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	home := t.TempDir()
	shape := []boxlite.BoxOption{boxlite.WithMemoryMiB(128)}
	prt := filledPool(ctx, t, home, 2, shape...)
	if l, _ := prt.List(ctx); len(l) != 0 {
		t.Fatalf("List shows %d boxes before any Create (pool boxes are hidden)", len(l))
	}

	// pool-a is renamed at its hand-over; pool-b keeps the default
	// hostname, so its hand-over asks nothing of its guest.
	var boxes []*boxlite.Box
	hostnames := map[string]string{"pool-a": "pool-a", "pool-b": boxlite.DefaultHostname}
	for _, name := range []string{"pool-a", "pool-b"} {
		t0 := time.Now()
		opts := append(shape, boxlite.WithName(name), boxlite.WithAutoRemove(false))
		if hostnames[name] != boxlite.DefaultHostname {
			opts = append(opts, boxlite.WithHostname(hostnames[name]))
		}
		b, err := prt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			t.Fatal(err)
		}
		runIn(t, b, sh("true"))
		t.Logf("%s: create to first exec result %.0f ms", name, float64(time.Since(t0).Microseconds())/1000)
		boxes = append(boxes, b)
		info := b.Info()
		if info.Runtime == nil || info.Runtime.Start != "pool" {
			t.Fatalf("%s: started by %+v, want a hand-over from the pool", name, info.Runtime)
		}
		if info.Name != name || info.State != boxlite.StateRunning || info.Config.AutoRemove {
			t.Fatalf("%s: info %+v", name, info)
		}
		got, err := prt.Get(ctx, name)
		if err != nil || got.ID() != b.ID() {
			t.Fatalf("Get(%s): %v, %v", name, got, err)
		}
	}
	t.Cleanup(func() {
		for _, b := range boxes {
			b.Remove(context.Background(), true)
		}
	})
	// A name taken is refused, even for a pool box.
	if _, err := prt.Create(ctx, "alpine:latest", append(shape, boxlite.WithName("pool-a"))...); err == nil {
		t.Fatal("a second box named pool-a was created")
	}

	// Each a machine of its own.
	probe := "hostname; cat /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; cat /proc/sys/kernel/random/uuid; cat /etc/machine-id 2>/dev/null || echo no-machine-id"
	seen := map[string]string{}
	for i, b := range boxes {
		out := strings.Fields(string(runIn(t, b, sh(probe)).Stdout))
		if len(out) != 5 {
			t.Fatalf("box %d said %q", i, out)
		}
		if out[0] != hostnames[b.Name()] {
			t.Errorf("box %s has hostname %q, want %q", b.Name(), out[0], hostnames[b.Name()])
		}
		for j, what := range []string{"hostname", "boot id", "random bytes", "uuid", "machine id"} {
			if out[j] == "no-machine-id" {
				continue // the image has none
			}
			if prev, dup := seen[out[j]]; dup {
				t.Errorf("two handed-over boxes read the same %s %q (%s)", what, out[j], prev)
			}
			seen[out[j]] = what + " of " + b.Name()
		}
	}
	// Their state and disks are their own.
	runIn(t, boxes[0], sh("echo a > /root/mine; echo a > /tmp/mine; sync"))
	if out := string(runIn(t, boxes[1], sh("cat /root/mine /tmp/mine 2>&1; true")).Stdout); strings.Contains(out, "a\n") {
		t.Fatalf("pool-b sees pool-a's files: %q", out)
	}
	for _, b := range boxes {
		if _, err := os.Stat(filepath.Join(b.Info().Dir, "disk.ext4")); err != nil {
			t.Errorf("%s: %v", b.Name(), err)
		}
	}
	if err := boxes[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 3*time.Minute)
	err := boxes[0].Start(sctx)
	scancel()
	if err != nil {
		dir := boxes[0].Info().Dir
		shimLog, _ := os.ReadFile(filepath.Join(dir, "shim.log"))
		console, _ := os.ReadFile(filepath.Join(dir, "console.log"))
		t.Fatalf("restart of pool-a: %v\n--- shim.log ---\n%s\n--- console.log ---\n%s", err, shimLog, console)
	}
	if out := string(runIn(t, boxes[0], sh("cat /root/mine; hostname")).Stdout); out != "a\npool-a\n" { // a boot now
		t.Fatalf("pool-a after a restart: %q", out)
	}

	// The pool refilled behind the hand-overs.
	if err := prt.WaitWarmPools(ctx); err != nil {
		t.Fatal(err)
	}
	if st := prt.WarmPools(); st[0].Ready != 2 {
		t.Fatalf("pool after the refill: %+v", st)
	}
	// What cannot be pooled starts as usual; another shape too.
	for _, opts := range [][]boxlite.BoxOption{
		append(shape, boxlite.WithPorts(boxlite.Port{GuestPort: 8080})),
		{boxlite.WithMemoryMiB(192)},
	} {
		b, err := prt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			t.Fatal(err)
		}
		runIn(t, b, sh("true"))
		if s := b.Info().Runtime.Start; s == "pool" {
			t.Errorf("a box that cannot come from the pool came from it")
		}
		b.Remove(ctx, true)
	}
	if l, _ := prt.List(ctx); len(l) != 2 {
		t.Fatalf("List shows %d boxes, want the 2 handed over", len(l))
	}
	// Closing the runtime removes the pool's boxes; the handed-over ones stay.
	prt.Close()
	ents, _ := os.ReadDir(filepath.Join(home, "boxes"))
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("after Close the home holds boxes %v, want the 2 handed over", names)
	}
}

// filledPool is a runtime in home (closed at the end of the test) with a
// warm pool of n alpine boxes of shape, filled.
func filledPool(ctx context.Context, t *testing.T, home string, n int, shape ...boxlite.BoxOption) *boxlite.Runtime {
	t.Helper()
	prt, err := boxlite.NewRuntime(boxlite.WithHome(home), boxlite.WithTemplates(true), boxlite.WithWarmPool(n, "alpine:latest", shape...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prt.Close() })
	if _, err := prt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		t.Fatal(err)
	}
	if err := prt.WaitWarmPools(ctx); err != nil {
		t.Fatal(err)
	}
	if st := prt.WarmPools(); len(st) != 1 || st[0].Ready != n {
		t.Fatalf("pool after the wait: %+v, want %d ready", st, n)
	}
	return prt
}
