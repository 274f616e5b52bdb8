package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// settle is how long a box idles before its memory is read: the guest
// reports free pages to the host in passes 2 s apart.
const settle = 6 * time.Second

// heavyMiB is what the memory-heavy exec allocates, touches and frees:
// busybox dd reads /dev/zero into one buffer of this size.
const heavyMiB = 300

// idleMemory records the host RSS of an idle box (shim + QEMU, with QEMU's
// smaps broken down), then the same after an exec that allocated and freed
// heavyMiB in the guest.
func idleMemory(ctx context.Context, box *boxlite.Box) error {
	info := box.Info()
	memMiB := info.Config.MemoryMiB
	time.Sleep(settle)
	memoryRows(ctx, box, fmt.Sprintf("idle %d MiB box", memMiB))

	dd := fmt.Sprintf("dd if=/dev/zero of=/dev/null bs=%dM count=1", heavyMiB)
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", dd}})
	if err != nil {
		return fmt.Errorf("memory-heavy exec %q: %v", dd, err)
	}
	if res.Code != 0 {
		return fmt.Errorf("memory-heavy exec %q: exit %d: %q", dd, res.Code, res.Stderr)
	}
	peak := rssKB(info.Runtime.VMMPid)
	time.Sleep(settle)
	rec.add(fmt.Sprintf("QEMU RSS right after a %d MiB exec", heavyMiB), float64(peak)/1024, "MiB", nil)
	memoryRows(ctx, box, fmt.Sprintf("idle %d MiB box after a %d MiB exec", memMiB, heavyMiB))
	return nil
}

// memoryRows records the box's host RSS (goal: issue 12's 100 MiB): its
// shim, QEMU and network stack, QEMU's smaps by kind and what the guest
// itself says it uses.
func memoryRows(ctx context.Context, box *boxlite.Box, what string) {
	rt := box.Info().Runtime
	shim, vmm, net := rssKB(rt.ShimPid), rssKB(rt.VMMPid), rssKB(childNamed(rt.ShimPid, "boxlite-net"))
	rec.add("host RSS, "+what, float64(shim+vmm+net)/1024, "MiB", atMost(100))
	rec.add("  shim RSS", float64(shim)/1024, "MiB", nil)
	rec.add("  QEMU RSS", float64(vmm)/1024, "MiB", nil)
	rec.add("  network stack RSS", float64(net)/1024, "MiB", nil)
	kinds, err := smapsByKind(rt.VMMPid, box.Info().Config.MemoryMiB)
	if err != nil {
		fmt.Println("  smaps:", err)
	}
	for _, k := range smapsKinds {
		rec.add("    "+k, float64(kinds[k])/1024, "MiB", nil)
	}
	// Files are page cache that every box maps alike (QEMU, its libraries,
	// the kernel and initramfs): what a box costs on its own is the rest.
	rec.add("  of it, the box's own (less QEMU's file pages)", float64(shim+vmm+net-kinds[filesKind])/1024, "MiB", nil)
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo"}})
	if err == nil {
		var total, avail int
		for _, l := range strings.Split(string(res.Stdout), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				switch f[0] {
				case "MemTotal:":
					total = n
				case "MemAvailable:":
					avail = n
				}
			}
		}
		rec.add("  guest's own use (MemTotal - MemAvailable)", float64(total-avail)/1024, "MiB", nil)
	}
}

// childNamed is the pid of pid's child whose command name is comm (0: none).
// Each thread lists the children it forked: a Go process forks from any.
func childNamed(pid int, comm string) int {
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var b []byte
	for _, l := range lists {
		c, _ := os.ReadFile(l)
		b = append(append(b, ' '), c...)
	}
	for _, c := range strings.Fields(string(b)) {
		if name, _ := os.ReadFile("/proc/" + c + "/comm"); strings.TrimSpace(string(name)) == comm {
			n, _ := strconv.Atoi(c)
			return n
		}
	}
	return 0
}

// smapsKinds are the kinds smapsByKind sorts QEMU's mappings into.
var smapsKinds = []string{"guest RAM", "TCG translation cache", "heap", "other anonymous", filesKind}

const filesKind = "files (binary, libraries, kernel, initrd)"

// smapsByKind sums the Rss (kB) of pid's mappings by kind: the mapping of
// the guest's RAM size is guest RAM; an anonymous rwx one is TCG's code
// buffer; [heap]; files; the rest (thread stacks, malloc arenas, ...).
func smapsByKind(pid, memMiB int) (map[string]int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	kind := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") { // a mapping's header
			kind = mappingKind(f, memMiB)
			continue
		}
		if f[0] == "Rss:" && len(f) >= 2 {
			n, _ := strconv.Atoi(f[1])
			out[kind] += n
		}
	}
	return out, sc.Err()
}

func mappingKind(header []string, memMiB int) string {
	lo, hi, _ := strings.Cut(header[0], "-")
	a, _ := strconv.ParseUint(lo, 16, 64)
	b, _ := strconv.ParseUint(hi, 16, 64)
	path := ""
	if len(header) >= 6 {
		path = strings.Join(header[5:], " ")
	}
	switch size := b - a; {
	case size >= uint64(memMiB)<<20 && size <= uint64(memMiB+4)<<20:
		return "guest RAM" // anonymous, or a memfd with volumes
	case path == "[heap]":
		return "heap"
	case strings.HasPrefix(path, "/"):
		return filesKind
	case strings.HasPrefix(header[1], "rwx"):
		return "TCG translation cache"
	}
	return "other anonymous"
}

// memOnly is the memory rows alone (bench -mem), with the guest's free
// lists and page reporting order printed: the quick loop for memory work.
func memOnly() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Booted boxes: a box restored from a template has no balloon.
	rt, done, err := imageRuntime(ctx, boxlite.WithTemplates(false))
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	box, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithMemoryMiB(512))
	if err != nil {
		return err
	}
	defer box.Remove(context.Background(), true)
	if _, err := box.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
		return err
	}
	rec.add("create to first exec result", msf(time.Since(start)), "ms", nil)
	if err := idleMemory(ctx, box); err != nil {
		return err
	}
	res, err := box.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c",
		"cat /proc/buddyinfo /sys/module/page_reporting/parameters/page_reporting_order; grep -E '^(MemTotal|MemFree|Cached|Shmem|AnonPages|Slab|KernelStack|PageTables|Percpu)' /proc/meminfo"}})
	if err != nil {
		return err
	}
	fmt.Printf("guest:\n%s%s", res.Stdout, res.Stderr)
	printTopMappings(box.Info().Runtime.VMMPid, 14)
	return nil
}

// printTopMappings prints pid's n largest mappings by Rss: the profile
// behind the kinds.
func printTopMappings(pid, n int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		fmt.Println("  smaps:", err)
		return
	}
	type m struct {
		header string
		rss    int
	}
	var ms []m
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			ms = append(ms, m{header: l})
		case len(f) >= 2 && f[0] == "Rss:" && len(ms) > 0:
			ms[len(ms)-1].rss, _ = strconv.Atoi(f[1])
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].rss > ms[j].rss })
	fmt.Printf("QEMU's %d largest mappings by Rss:\n", n)
	for _, x := range ms[:min(n, len(ms))] {
		fmt.Printf("  %7d kB  %s\n", x.rss, x.header)
	}
}
