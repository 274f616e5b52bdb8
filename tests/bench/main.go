// Command bench prints boxlite's figures, each next to a baseline measured in
// the same run (these machines are noisy, so ratios are what to compare):
//
//   - cold start to first exec result vs. bare QEMU booting Debian's stock
//     kernel (the bzImage) with the same initramfs and disks to the agent's
//     hello, and bare boots of the box's own kernel, plain and jailed;
//   - exec round trip of `true` (p50/p90) vs. a spawn of true in the guest,
//     and stdout throughput into the host (p50/p90 of rounds) vs. the same
//     bytes through a pipe in the guest (exec.go; `bench -exec` alone);
//   - host RSS of an idle box (shim + QEMU, QEMU's smaps by kind), after
//     boot and after an exec that allocated and freed 300 MiB.
//
// Every figure is a row (record.go) with its unit, baseline, ratio, issue
// 12's goal where it has one, and the acceleration measured (hv.DetectAccel).
// The table is printed at the end, and the rows go to build/bench.json under
// the mode's name ("main", "mem", "net", "volumes", "copy", "spin",
// "many-N"): one file, each run replacing its own mode's entry.
//
// Run it with `make bench`; `bench -mem` is the memory rows alone, with the
// guest's free lists and QEMU's largest mappings; `bench -pause` is pause and
// resume against cold and template starts (pause.go); `bench -paused N`
// puts N boxes to sleep and resumes random ones among them (paused.go);
// `bench -idle [N]` is the CPU of idle boxes and exec among N idle boxes
// (idle.go, default 20); `bench -pool` is a warm pool's hand-over against a
// template start.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/jail"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

const boots = 3

// modes are the figures a flag selects instead of the main ones.
var modes = map[string]func() error{
	"-net":     network,
	"-volumes": volumes,
	"-copy":    copyBench,
	"-spin":    spin,
	"-mem":     memOnly,
	"-warm":    warm,
	"-rest":    restBench,
	"-pause":   pauseBench,
	"-tunnel":  tunnelBench,
	"-pool":    poolBench,
	"-idle":    func() error { return idle(defaultIdleBoxes) },
	"-exec":    execBench,
}

// defaultIdleBoxes is -idle's count of idle boxes (-idle N sets it).
const defaultIdleBoxes = 20

func main() {
	jail.Main() // the jailed bare boots re-execute this binary
	err := func() error {
		var f func() error
		mode := "main"
		switch {
		case len(os.Args) == 3 && os.Args[1] == "-many": // only the many-boxes-at-once figure, for N boxes
			n, err := strconv.Atoi(os.Args[2])
			if err != nil {
				return err
			}
			f, mode = func() error { return many(n) }, "many-"+os.Args[2]
		case len(os.Args) == 3 && os.Args[1] == "-idle": // idle CPU, and exec among N idle boxes
			n, err := strconv.Atoi(os.Args[2])
			if err != nil || n < 1 {
				return fmt.Errorf("-idle %q: want a count of boxes", os.Args[2])
			}
			f, mode = func() error { return idle(n) }, "idle-"+os.Args[2]
		case len(os.Args) == 3 && os.Args[1] == "-paused": // N boxes put to sleep, and resumes among them
			n, err := strconv.Atoi(os.Args[2])
			if err != nil || n < 1 {
				return fmt.Errorf("-paused %q: want a count", os.Args[2])
			}
			f, mode = func() error { return pausedBench(n) }, "paused-"+os.Args[2]
		case len(os.Args) == 2 && modes[os.Args[1]] != nil:
			f, mode = modes[os.Args[1]], os.Args[1][1:]
		case len(os.Args) == 1:
			f = run
		default:
			return fmt.Errorf("usage: bench [-many N | -paused N | -idle [N] | -net | -volumes | -copy | -spin | -mem | -warm | -exec | -pool | -rest | -pause | -tunnel]")
		}
		var err error
		if rec, err = newRecorder(mode); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		return rec.save()
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	// Cold figures: every box boots (warm starts are -warm's).
	rt, done, err := freshRuntime(boxlite.WithTemplates(false))
	if err != nil {
		return err
	}
	defer done()
	if _, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_IMAGE")); err != nil {
		return err
	}

	// Cold start: Create (shim, QEMU, kernel, agent) to the first exec
	// result, each box followed by a round of bare boots, so that the load
	// of this shared machine weighs on both alike.
	var cold, boot, rest []time.Duration // create to first exec; of it, VMM start to hello; the rest
	var box *boxlite.Box
	var bare bareBoots
	defer func() {
		if bare.close != nil {
			bare.close()
		}
	}()
	for i := range boots {
		start := time.Now()
		b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest")
		if err != nil {
			return err
		}
		if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return err
		}
		cold = append(cold, time.Since(start))
		vmmBoot := time.Duration(b.Info().Runtime.BootMs * float64(time.Millisecond))
		boot, rest = append(boot, vmmBoot), append(rest, cold[i]-vmmBoot)
		if i < boots-1 {
			b.Remove(ctx, true)
		} else {
			box = b
		}
		if i == 0 {
			if bare, err = newBareBoots(rt, b.Info().Config.MemoryMiB); err != nil {
				return err
			}
		}
		if err := bare.round(); err != nil {
			return err
		}
	}
	info := box.Info().Runtime
	if info.Accel != string(rec.accel) {
		return fmt.Errorf("the box runs under %s, the bench measured %s", info.Accel, rec.accel)
	}
	stock := median(bare.stock)
	rec.vs("cold start, create to first exec result", msf(median(cold)), "ms", "bare QEMU, stock kernel, to agent hello", msf(stock), atMost(0.7))
	rec.add("  of it, VMM start to agent ready", msf(median(boot)), "ms", nil)
	rec.add("  of it, the rest (runtime, shim, disks, first exec)", msf(median(rest)), "ms", nil)
	rec.vs("bare QEMU, box kernel, to agent hello", msf(median(bare.plain)), "ms", "stock kernel", msf(stock), nil)
	rec.vs("bare QEMU jailed, box kernel, to agent hello", msf(median(bare.jailed)), "ms", "not jailed", msf(median(bare.plain)), nil)
	rec.add("guest clock: boot to agent start", info.GuestKernelMs, "ms", nil)
	rec.add("guest clock: boot to agent ready", info.GuestReadyMs, "ms", nil)

	// Exec round trip and stdout (exec.go).
	if err := execRows(ctx, box); err != nil {
		return err
	}

	if err := idleMemory(ctx, box); err != nil {
		return err
	}
	if err := box.Remove(ctx, true); err != nil {
		return err
	}
	if py := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE"); py != "" {
		if err := pythonImage(ctx, py); err != nil {
			return err
		}
		return sessionBench(ctx, py)
	}
	return nil
}

// pythonImage measures the python:slim stand-in in a fresh home: load,
// conversion of its layer to ext4, store size, and create to the first exec
// result with the image converted or not.
func pythonImage(ctx context.Context, archive string) error {
	rt, done, err := freshRuntime(boxlite.WithTemplates(false)) // both boxes boot: the figure is the conversion's
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	imgs, err := rt.Images().Load(ctx, archive)
	if err != nil {
		return err
	}
	load := time.Since(start)
	firstExec := func() (time.Duration, error) {
		start := time.Now()
		b, err := boxtest.CreateStarted(ctx, rt, imgs[0].Name)
		if err != nil {
			return 0, err
		}
		defer b.Remove(ctx, true)
		_, err = b.Run(ctx, boxlite.Command{Argv: []string{"python3", "-c", "pass"}})
		return time.Since(start), err
	}
	cold, err := firstExec() // converts the layer to ext4 first
	if err != nil {
		return err
	}
	layers, err := rt.Images().Rootfs(ctx, imgs[0])
	if err != nil {
		return err
	}
	warm, err := firstExec()
	if err != nil {
		return err
	}
	var ext4 int64
	for _, l := range layers {
		if st, err := os.Stat(l); err == nil {
			ext4 += st.Size()
		}
	}
	rec.add("python:slim load", msf(load), "ms", nil)
	rec.add("python:slim blobs", float64(imgs[0].Size)/1e6, "MB", nil)
	rec.add("python:slim ext4", float64(ext4)/1e6, "MB", nil)
	rec.vs("python:slim create to first `python3 -c pass`, unconverted", msf(cold), "ms", "converted", msf(warm), nil)
	return nil
}

// freshRuntime opens a runtime on a temporary home; done closes and removes it.
func freshRuntime(opts ...boxlite.Option) (*boxlite.Runtime, func(), error) {
	home, err := os.MkdirTemp("", "bxb")
	if err != nil {
		return nil, nil, err
	}
	rt, err := boxlite.NewRuntime(append([]boxlite.Option{boxlite.WithHome(home)}, opts...)...)
	if err != nil {
		os.RemoveAll(home)
		return nil, nil, err
	}
	return rt, func() { rt.Close(); os.RemoveAll(home) }, nil
}

// bareBoots are hv's boots to the agent's hello, without shim or runtime.
type bareBoots struct {
	stock  []time.Duration // Debian's kernel as shipped (bzImage), the cold-start baseline
	plain  []time.Duration // the box's kernel
	jailed []time.Duration // the box's kernel, QEMU jailed as boxes run it

	cfgs  [3]hv.Config // stock, plain, jailed
	close func()
}

// newBareBoots prepares boots of the agent and alpine's layers with hv alone
// (no shim, no runtime): Debian's stock kernel (with an initramfs of its
// modules), the box's kernel and initramfs, and those jailed. close cleans up.
func newBareBoots(rt *boxlite.Runtime, memMiB int) (bb bareBoots, err error) {
	bb.close = func() {}
	dir, err := os.MkdirTemp("", "bxq")
	if err != nil {
		return bb, err
	}
	bb.close = func() { os.RemoveAll(dir) }
	img, err := rt.Images().Get("alpine:latest")
	if err != nil {
		return bb, err
	}
	layers, err := rt.Images().Rootfs(context.Background(), img)
	if err != nil {
		return bb, err
	}
	assets := os.Getenv("BOXLITE_ASSETS")
	cfg := hv.Config{Kernel: filepath.Join(assets, "guest", "vmlinuz"), Initrd: filepath.Join(assets, "guest", "initramfs.cpio"),
		MemoryMiB: memMiB, CPUs: 1, Channel: true,
		ConsoleLog: filepath.Join(dir, "console.log"), Accel: rec.accel}
	for i, l := range layers {
		cfg.Disks = append(cfg.Disks, hv.Disk{Path: l, Serial: protocol.LayerSerial(i), ReadOnly: true})
	}
	stock := cfg
	stock.Kernel, stock.Initrd = stockKernel(assets)
	j := &hv.Jail{Cgroup: fmt.Sprintf("boxlite-bench-%d", os.Getpid())}
	if os.Geteuid() == 0 {
		uid, release, err := jail.AllocUID(filepath.Join(dir, "uids"), jail.UIDRangeLo, jail.UIDRangeHi)
		if err != nil {
			return bb, err
		}
		bb.close = func() { release(); os.RemoveAll(dir) }
		j.UID, j.GID = uid, uid
	}
	jailed := cfg
	jailed.Jail = j
	bb.cfgs = [3]hv.Config{stock, cfg, jailed}
	return bb, nil
}

// round boots each configuration once.
func (bb *bareBoots) round() error {
	for i, into := range []*[]time.Duration{&bb.stock, &bb.plain, &bb.jailed} {
		d, err := bareBoot(bb.cfgs[i])
		if err != nil {
			return err
		}
		*into = append(*into, d)
	}
	return nil
}

// bareBoot is the time from hv.Start to the agent's hello.
func bareBoot(c hv.Config) (time.Duration, error) {
	start := time.Now()
	vm, err := hv.Start(c)
	if err != nil {
		return 0, err
	}
	defer vm.Kill()
	ch := vm.Channel()
	ch.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err = protocol.NewReader(ch).ReadFrame(); err != nil {
		return 0, fmt.Errorf("bare boot of %s: %v", c.Kernel, err)
	}
	return time.Since(start), nil
}

// stockKernel is Debian's kernel as guest/fetch-kernel.sh fetched it
// (BOXLITE_STOCK_KERNEL, default BOXLITE_ASSETS/guest/debian-kernel, where
// make keeps it whichever kernel boxes boot), and the initramfs make builds
// next to it: the box's agent with that kernel's modules.
func stockKernel(assets string) (kernel, initrd string) {
	dir := os.Getenv("BOXLITE_STOCK_KERNEL")
	if dir == "" {
		dir = filepath.Join(assets, "guest", "debian-kernel")
	}
	return filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs.cpio")
}

// guestSpawn times n spawns of true inside the guest, per spawn.
func guestSpawn(ctx context.Context, box *boxlite.Box, n int) (time.Duration, error) {
	ns, err := guestNs(ctx, box, "/bin/true", n)
	return time.Duration(ns / int64(n)), err
}

// guestNs times n runs of a shell command by the guest's clock. busybox date
// has no nanoseconds, so it reads /proc/uptime (10 ms resolution).
func guestNs(ctx context.Context, box *boxlite.Box, cmd string, n int) (int64, error) {
	script := fmt.Sprintf(`cs() { tr -d . </proc/uptime | cut -d' ' -f1; }; s=$(cs); i=0; while [ $i -lt %d ]; do %s; i=$((i+1)); done; e=$(cs); echo $((e-s))`, n, cmd)
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", script}})
	if err != nil {
		return 0, err
	}
	cs, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
	if err != nil || cs <= 0 {
		return 0, fmt.Errorf("guest timing: %q %q", res.Stdout, res.Stderr)
	}
	return cs * 1e7, nil
}

func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// msf is d in milliseconds, for rows.
func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
