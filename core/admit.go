package core

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Box starts are admitted against what the host can run, across every
// process that shares a home, instead of racing: at most maxBoots VMs boot
// at once (default one per CPU; see WithMaxConcurrentBoots) (each holds one of the flock'd slot files <home>/state/boot/N
// from VMM start to its agent's hello), and a box whose memory could never
// fit in the host is refused before anything starts. A box's boot deadline
// starts when its boot is admitted, not while it waits.

// vmmOverheadMiB is what a box costs the host beyond its guest RAM: QEMU
// itself and, under TCG, its translation cache (see hv).
const vmmOverheadMiB = 512

// admitPoll is how often a waiting start looks for a free slot.
const admitPoll = 20 * time.Millisecond

func defaultMaxBoots() int { return max(runtime.NumCPU(), 1) }

// checkHostMemory refuses a box that needs more memory than the host has.
func checkHostMemory(cfg BoxConfig) error {
	total, err := meminfoMiB("MemTotal")
	if err != nil {
		return nil // no /proc/meminfo: nothing to judge by
	}
	if need := int64(cfg.MemoryMiB + vmmOverheadMiB); need > total {
		return errdefs.Errorf(errdefs.ErrLimit, "box needs %d MiB of host memory (%d MiB guest + %d MiB VMM), the host has %d MiB",
			need, cfg.MemoryMiB, vmmOverheadMiB, total)
	}
	return nil
}

// admitBoot waits for a boot slot, until ctx ends; release frees it.
func (r *Runtime) admitBoot(ctx context.Context, boxID string) (release func(), err error) {
	dir := filepath.Join(r.home, "state", "boot")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	for {
		for i := 0; i < r.maxBoots; i++ {
			f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err != nil {
				return nil, err
			}
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
			}
			f.Close()
		}
		select {
		case <-ctx.Done():
			return nil, errdefs.Errorf(errdefs.ErrTimeout, "start box %s: waited %s for one of the %d boot slots (other boxes are booting): %v",
				boxID, time.Since(start).Round(time.Millisecond), r.maxBoots, ctx.Err())
		case <-time.After(admitPoll):
		}
	}
}

// meminfoMiB reads a field of /proc/meminfo, in MiB.
func meminfoMiB(field string) (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, err
		}
		return kb >> 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no %s", field)
}
