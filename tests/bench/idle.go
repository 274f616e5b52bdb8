package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// idleWindow is how long idle CPU is measured (per thread, from schedstat); idleSettle how long a box
// rests before (the guest's last boot work, the shim's freed buffers).
const (
	idleWindow = 10 * time.Second
	idleSettle = 3 * time.Second
)

// cpuTime is the CPU time process pid's threads have used, in nanoseconds
// from their schedstat (/proc/PID/stat counts 10 ms ticks: too coarse for an
// idle box); threads that exited meanwhile are missed, so it can err low.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// idleProcs are the host processes of a running box: shim, VMM, network stack.
type idleProcs struct{ shim, vmm, net int }

func idleProcsOf(b *boxlite.Box) idleProcs {
	i := b.Info().Runtime
	return idleProcs{shim: i.ShimPid, vmm: i.VMMPid, net: childNamed(i.ShimPid, "boxlite-net")}
}

// idleCPU measures the CPU time each process uses over idleWindow.
func idleCPU(procs []idleProcs) (shim, vmm, net time.Duration) {
	at := func() (s, v, n time.Duration) {
		for _, p := range procs {
			s, v, n = s+cpuTime(p.shim), v+cpuTime(p.vmm), n+cpuTime(p.net)
		}
		return
	}
	s0, v0, n0 := at()
	time.Sleep(idleWindow)
	s1, v1, n1 := at()
	return s1 - s0, v1 - v0, n1 - n0
}

// idle measures what idle boxes cost: the CPU time of one idle box's shim,
// VMM and network stack over idleWindow, against bare QEMU (hv alone) idling
// after the agent's hello with the same kernel, initramfs and disks; then
// the exec latency of `true` among n idle 128 MiB boxes, against the same
// in one box alone.
func idle(n int) error {
	ctx, rt, done, err := timedImageRuntime(15 * time.Minute)
	if err != nil {
		return err
	}
	defer done()
	one, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
	if err != nil {
		return err
	}
	if _, err := one.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
		return err
	}
	bare, stopBare, err := bareIdleVM(rt, 128)
	if err != nil {
		return err
	}
	time.Sleep(idleSettle)
	procs := idleProcsOf(one)
	irqs0, err := guestInterrupts(ctx, one)
	if err != nil {
		return err
	}
	bareStart := cpuTime(bare)
	shim, vmm, net := idleCPU([]idleProcs{procs})
	bareCPU := cpuTime(bare) - bareStart
	stopBare()
	irqs1, err := guestInterrupts(ctx, one)
	if err != nil {
		return err
	}
	// The guest's side of the profile: what woke its CPU in the window
	// (the two reads' own exec included).
	var woke []string
	for name, n := range irqs1 {
		if d := n - irqs0[name]; d > 0 {
			woke = append(woke, fmt.Sprintf("%s %.1f/s", name, float64(d)/idleWindow.Seconds()))
		}
	}
	sort.Strings(woke)
	fmt.Printf("  guest interrupts while idle: %s\n", strings.Join(woke, ", "))
	// In percent of a core.
	frac := func(d time.Duration) float64 { return 100 * d.Seconds() / idleWindow.Seconds() }
	fmt.Printf("  one idle box over %s: shim %.1f ms, QEMU %.1f ms, network stack %.1f ms of CPU; bare QEMU %.1f ms\n",
		idleWindow, msf(shim), msf(vmm), msf(net), msf(bareCPU))
	total := shim + vmm + net
	rec.add("CPU of one idle box (shim + QEMU + network stack)", frac(total), "% of a core", atMost(0.3))
	rec.vs("  the same against bare QEMU idle after the agent's hello (same kernel, initramfs, disks)", frac(total), "% of a core",
		"bare QEMU", frac(bareCPU), nil)
	rec.add("  of it, QEMU", frac(vmm), "% of a core", nil)
	rec.add("  of it, the shim", frac(shim), "% of a core", nil)
	rec.add("  of it, the network stack", frac(net), "% of a core", nil)

	alone, err := execP50(ctx, []*boxlite.Box{one}, 40)
	if err != nil {
		return err
	}
	boxes := []*boxlite.Box{one}
	defer func() {
		for _, b := range boxes {
			b.Remove(context.Background(), true)
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, n-1)
	for i := range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(128))
			if err == nil {
				_, err = b.Run(ctx, boxlite.Command{Argv: []string{"true"}})
				mu.Lock()
				boxes = append(boxes, b)
				mu.Unlock()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	time.Sleep(idleSettle)
	var all []idleProcs
	for _, b := range boxes {
		all = append(all, idleProcsOf(b))
	}
	s, v, nn := idleCPU(all)
	among, err := execP50(ctx, boxes, 2*len(boxes))
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%d idle 128 MiB boxes", n)
	rec.add(what+": CPU per box (shim + QEMU + network stack)", frac(s+v+nn)/float64(n), "% of a core", atMost(0.3))
	rec.vs(what+": exec of true, p50", msf(among), "ms", "one box alone", msf(alone), nil)
	return nil
}

// guestInterrupts reads the box's /proc/interrupts: each line's total over
// its CPUs, by its name (the first field and the last word).
func guestInterrupts(ctx context.Context, b *boxlite.Box) (map[string]int64, error) {
	res, err := b.Run(ctx, boxlite.Command{Argv: []string{"cat", "/proc/interrupts"}})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	lines := strings.Split(string(res.Stdout), "\n")
	if len(lines) == 0 {
		return out, nil
	}
	cpus := len(strings.Fields(lines[0]))
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		var total int64
		for _, v := range f[1:min(len(f), cpus+1)] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break
			}
			total += n
		}
		name := strings.TrimSuffix(f[0], ":")
		if len(f) > cpus+1 {
			name += " " + f[len(f)-1]
		}
		out[name] = total
	}
	return out, nil
}

// execP50 is the median of count execs of `true`, round the boxes.
func execP50(ctx context.Context, boxes []*boxlite.Box, count int) (time.Duration, error) {
	var d []time.Duration
	for i := range count {
		t0 := time.Now()
		if _, err := boxes[i%len(boxes)].Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return 0, err
		}
		d = append(d, time.Since(t0))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], nil
}

// bareIdleVM boots the box's kernel and initramfs with alpine's layers
// under hv alone (no shim, no network stack), waits for the agent's hello,
// stops the PIT as the shim does, and leaves the VM idle; it returns
// QEMU's pid and a stop function.
func bareIdleVM(rt *boxlite.Runtime, memMiB int) (int, func(), error) {
	dir, err := os.MkdirTemp("", "bxi")
	if err != nil {
		return 0, nil, err
	}
	img, err := rt.Images().Get("alpine:latest")
	if err != nil {
		return 0, nil, err
	}
	layers, err := rt.Images().Rootfs(context.Background(), img)
	if err != nil {
		return 0, nil, err
	}
	assets := os.Getenv("BOXLITE_ASSETS")
	cfg := hv.Config{Kernel: filepath.Join(assets, "guest", "vmlinuz"), Initrd: filepath.Join(assets, "guest", "initramfs.cpio"),
		MemoryMiB: memMiB, CPUs: 1, Channel: true, ConsoleLog: filepath.Join(dir, "console.log"), Accel: rec.accel}
	for i, l := range layers {
		cfg.Disks = append(cfg.Disks, hv.Disk{Path: l, Serial: protocol.LayerSerial(i), ReadOnly: true})
	}
	vm, err := hv.Start(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return 0, nil, err
	}
	stop := func() { vm.Kill(); os.RemoveAll(dir) }
	ch := vm.Channel()
	ch.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := protocol.NewReader(ch).ReadFrame(); err != nil {
		stop()
		return 0, nil, fmt.Errorf("bare idle VM: %v", err)
	}
	if err := vm.StopPIT(); err != nil { // as the shim does
		stop()
		return 0, nil, err
	}
	return vm.Pid(), stop, nil
}

// poolBench measures create to first exec result of a box handed over from
// a warm pool against a template start of the same shape in the same run
// (and against bare QEMU booting the stock kernel to the agent's hello).
func poolBench() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	shape := []boxlite.BoxOption{boxlite.WithMemoryMiB(128)}
	rt, done, err := imageRuntime(ctx, boxlite.WithTemplates(true), boxlite.WithWarmPool(boots, "alpine:latest", shape...))
	if err != nil {
		return err
	}
	defer done()
	var handOverLine string // the shim's log line of the last hand-over
	firstExec := func(want string, opts ...boxlite.BoxOption) (time.Duration, error) {
		start := time.Now()
		b, err := rt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			return 0, err
		}
		defer b.Remove(ctx, true)
		if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return 0, err
		}
		d := time.Since(start)
		if s := b.Info().Runtime.Start; s != want {
			return 0, fmt.Errorf("a box started by %q (%s), want %s", s, b.Info().Runtime.StartNote, want)
		}
		if want == "pool" {
			handOverLine = lastLogLine(b, "handed over")
		}
		return d, nil
	}
	bare, err := newBareBoots(rt, 128)
	if err != nil {
		return err
	}
	defer bare.close()
	var pooled, renamed, tmpl []time.Duration
	for i := range boots {
		if err := rt.WaitWarmPools(ctx); err != nil {
			return err
		}
		d, err := firstExec("pool", shape...)
		if err != nil {
			return err
		}
		pooled = append(pooled, d)
		if err := rt.WaitWarmPools(ctx); err != nil {
			return err
		}
		// With a hostname of its own, the guest takes a new identity.
		if d, err = firstExec("pool", append(shape, boxlite.WithHostname(fmt.Sprintf("pooled-%d", i)))...); err != nil {
			return err
		}
		renamed = append(renamed, d)
		// The same shape but for its disk size: not the pool's, so a
		// template start (its template made before the rounds).
		if len(tmpl) == 0 {
			if _, err := firstExec("new-template", boxlite.WithMemoryMiB(128), boxlite.WithDiskSizeGB(9)); err != nil {
				return err
			}
		}
		if err := rt.WaitWarmPools(ctx); err != nil { // the refill does not weigh on the template start
			return err
		}
		if d, err = firstExec("template", boxlite.WithMemoryMiB(128), boxlite.WithDiskSizeGB(9)); err != nil {
			return err
		}
		tmpl = append(tmpl, d)
		if err := bare.round(); err != nil {
			return err
		}
	}
	fmt.Printf("  shim: %s\n", handOverLine)
	rec.vs("new box handed over from a warm pool, create to first exec result", msf(median(pooled)), "ms",
		"template start of the same shape", msf(median(tmpl)), nil)
	rec.vs("  the same with a hostname of its own (a new identity in the guest at the hand-over)", msf(median(renamed)), "ms",
		"template start of the same shape", msf(median(tmpl)), nil)
	rec.vs("  the same against bare QEMU booting the stock kernel to the agent's hello", msf(median(pooled)), "ms",
		"bare QEMU, stock kernel, to agent hello", msf(median(bare.stock)), atMost(0.05))
	return nil
}
