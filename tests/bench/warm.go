package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/boxlite/boxlite"
)

// warm measures warm starts from templates in a fresh home: create to the
// first exec result of a box restored from its template against bare QEMU
// booting the same kernel to the agent's hello (and against a cold start in
// the same run), where a restore's time goes (the shim's log line), and the
// host memory of N idle boxes of one template against one.
func warm() error {
	ctx := context.Background()
	rt, done, err := imageRuntime(ctx)
	if err != nil {
		return err
	}
	defer done()
	firstExec := func(opts ...boxlite.BoxOption) (*boxlite.Box, time.Duration, error) {
		start := time.Now()
		b, err := rt.Create(ctx, "alpine:latest", opts...)
		if err != nil {
			return nil, 0, err
		}
		if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
			return nil, 0, err
		}
		return b, time.Since(start), nil
	}
	first, made, err := firstExec()
	if err != nil {
		return err
	}
	if s := first.Info().Runtime.Start; s != "new-template" {
		return fmt.Errorf("the first box started by %q (%s), want new-template", s, first.Info().Runtime.StartNote)
	}
	// The baseline: bare QEMU booting the stock kernel, a round after each
	// warm box, so that the load of this shared machine weighs on both.
	bare, err := newBareBoots(rt, first.Info().Config.MemoryMiB)
	if err != nil {
		return err
	}
	defer bare.close()
	var warm []time.Duration
	var last *boxlite.Box
	for range boots {
		b, d, err := firstExec()
		if err != nil {
			return err
		}
		if s := b.Info().Runtime.Start; s != "template" {
			return fmt.Errorf("a box started by %q (%s), want template", s, b.Info().Runtime.StartNote)
		}
		warm = append(warm, d)
		if err := bare.round(); err != nil {
			return err
		}
		if last != nil {
			last.Remove(ctx, true)
		}
		last = b
	}
	if err := codeBoxRows(ctx, rt, &bare); err != nil {
		return err
	}
	restoreLine := lastLogLine(last, "restored from template")
	stages, _ := os.ReadFile(filepath.Join(last.Info().Dir, "stages.json"))
	last.Remove(ctx, true)

	stock := msf(median(bare.stock))
	rec.vs("warm start (from a template), create to first exec result", msf(median(warm)), "ms",
		"bare QEMU, stock kernel, to agent hello", stock, atMost(0.05))
	rec.vs("  the first box of its shape, which makes the template", msf(made), "ms",
		"bare QEMU, stock kernel, to agent hello", stock, nil)
	fmt.Printf("  shim: %s\n  core stages: %s\n", restoreLine, strings.Join(strings.Fields(string(stages)), " "))

	// Memory: one idle box of the template, then ten.
	mem := func(boxes []*boxlite.Box) (total, shared float64) {
		time.Sleep(3 * time.Second)
		for _, b := range boxes {
			i := b.Info().Runtime
			total += smapsMiB(i.VMMPid, "Pss:") + smapsMiB(i.ShimPid, "Pss:") + smapsMiB(childNamed(i.ShimPid, "boxlite-net"), "Pss:")
		}
		// The template memory no VMM maps (the shims hold it) is in no Pss.
		shared = templateMemMiB(rt.Home()) - sharedMappedMiB(boxes)
		return total + shared, shared
	}
	one, oneShared := mem([]*boxlite.Box{first})
	boxes := []*boxlite.Box{first}
	for len(boxes) < 10 {
		b, _, err := firstExec()
		if err != nil {
			return err
		}
		boxes = append(boxes, b)
	}
	ten, tenShared := mem(boxes)
	memoryRows(ctx, boxes[1], "idle box restored from a template")
	rec.vs("host memory of 10 idle boxes of one template (Pss of QEMU, shim and network stack, plus template memory no VMM maps)", ten, "MiB",
		"one such box", one, atMost(3))
	fmt.Printf("  template memory no VMM maps: %.0f MiB with one box, %.0f with ten\n", oneShared, tenShared)
	i := boxes[1].Info().Runtime
	fmt.Printf("  one restored box: QEMU Rss %.0f MiB (template memory %.0f MiB of it, its own anonymous memory %.0f MiB), Pss %.0f MiB; shim Rss %.0f MiB\n",
		smapsMiB(i.VMMPid, "Rss:"), statusMiB(i.VMMPid, "RssShmem:"), smapsMiB(i.VMMPid, "Anonymous:"), smapsMiB(i.VMMPid, "Pss:"), smapsMiB(i.ShimPid, "Rss:"))
	for _, b := range boxes {
		b.Remove(ctx, true)
	}
	return nil
}

// codeBoxRows measures what CodeBox() then run() costs on python:slim: a
// box created with a prestarted Python session (as CodeBox asks) to the
// first cell's result, restored from its template, against bare QEMU
// booting the stock kernel in the same rounds, and the same box shape
// without the prestart (its interpreter starts in the box).
func codeBoxRows(ctx context.Context, rt *boxlite.Runtime, bare *bareBoots) error {
	imgs, err := rt.Images().Load(ctx, os.Getenv("BOXLITE_TEST_PYTHON_IMAGE"))
	if err != nil {
		return err
	}
	firstRun := func(want string, opts ...boxlite.BoxOption) (time.Duration, error) {
		start := time.Now()
		b, err := rt.Create(ctx, imgs[0].Name, opts...)
		if err != nil {
			return 0, err
		}
		defer b.Remove(ctx, true)
		s, err := b.NewPythonSession(ctx, boxlite.SessionOptions{})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		r, err := s.Run(ctx, "print(sum(range(100)))", time.Minute)
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(string(r.Stdout)) != "4950" {
			return 0, fmt.Errorf("the cell printed %q", r.Stdout)
		}
		d := time.Since(start)
		if s := b.Info().Runtime.Start; s != want {
			return 0, fmt.Errorf("a python box started by %q (%s), want %s", s, b.Info().Runtime.StartNote, want)
		}
		return d, nil
	}
	prestart := boxlite.WithPrestart(boxlite.PrestartPython)
	made, err := firstRun("new-template", prestart)
	if err != nil {
		return err
	}
	if _, err := firstRun("new-template"); err != nil {
		return err
	}
	n := len(bare.stock)
	var pre, plain []time.Duration
	for range boots {
		d, err := firstRun("template", prestart)
		if err != nil {
			return err
		}
		pre = append(pre, d)
		if d, err = firstRun("template"); err != nil {
			return err
		}
		plain = append(plain, d)
		if err := bare.round(); err != nil {
			return err
		}
	}
	stock := msf(median(bare.stock[n:]))
	rec.vs("CodeBox() to first run() result (prestarted session, warm start)", msf(median(pre)), "ms",
		"bare QEMU, stock kernel, to agent hello", stock, atMost(0.10))
	rec.vs("  the same without the prestarted session (the interpreter starts in the box)", msf(median(plain)), "ms",
		"bare QEMU, stock kernel, to agent hello", stock, nil)
	rec.vs("  the first CodeBox of its shape, which makes the template", msf(made), "ms",
		"bare QEMU, stock kernel, to agent hello", stock, nil)
	return nil
}

// smapsMiB is a field of /proc/PID/smaps_rollup, in MiB.
func smapsMiB(pid int, field string) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// templateMemMiB is the memory of the template memfds the shims of a home
// hold (each template's, once).
func templateMemMiB(home string) float64 {
	holders, _ := filepath.Glob(filepath.Join(home, "templates", "*", "*", "holders", "*"))
	seen := map[string]bool{}
	var total float64
	for _, h := range holders {
		pid, fd, _ := strings.Cut(filepath.Base(h), "-")
		path := "/proc/" + pid + "/fd/" + fd
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || seen[fmt.Sprint(st.Dev, st.Ino)] {
			continue
		}
		seen[fmt.Sprint(st.Dev, st.Ino)] = true
		total += float64(st.Blocks*512) / (1 << 20)
	}
	return total
}

// sharedMappedMiB is a lower bound of the template memory the boxes' VMMs
// map (in their Pss already): the most one of them maps. The total then
// errs high.
func sharedMappedMiB(boxes []*boxlite.Box) float64 {
	var most float64
	for _, b := range boxes {
		most = max(most, statusMiB(b.Info().Runtime.VMMPid, "RssShmem:"))
	}
	return most
}

// statusMiB is a field of /proc/PID/status, in MiB.
func statusMiB(pid int, field string) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// lastLogLine is the last line of the box's shim log that holds s.
func lastLogLine(b *boxlite.Box, s string) string {
	log, _ := os.ReadFile(filepath.Join(b.Info().Dir, "shim.log"))
	var out string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, s) {
			out = l
		}
	}
	return out
}
