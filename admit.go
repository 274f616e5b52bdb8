package boxlite

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
// process that shares a home, instead of racing:
//   - CPU: at most maxBoots VMs boot at once (default one per CPU; see
//     WithMaxConcurrentBoots). Each holds one of the flock'd slot files
//     <home>/state/boot/N from VMM start to its agent's hello.
//   - Memory: a boot is admitted only while the host's MemAvailable, less
//     the needs of the boots in flight (each writes its need into its slot
//     file) and a reserve for the host (WithHostMemoryReserveMiB), covers
//     the box's guest RAM plus VMM overhead. Booted boxes count through
//     MemAvailable itself, as far as their pages are touched.
//   - A box whose memory could never fit in the host is refused at once.
// A box's boot deadline starts when its boot is admitted, not while it waits.

// vmmOverheadMiB is what a box costs the host beyond its guest RAM: QEMU
// itself and, under TCG, its translation cache (see hv).
const vmmOverheadMiB = 512

// admitPoll is how often a waiting start looks for a free slot.
const admitPoll = 20 * time.Millisecond

func defaultMaxBoots() int { return max(runtime.NumCPU(), 1) }

// defaultMemoryReserveMiB keeps a twentieth of the host's memory (at least
// 256 MiB) out of reach of box starts, for the host and the apps on it.
func defaultMemoryReserveMiB() int64 {
	total, err := meminfoMiB("MemTotal")
	if err != nil {
		return 256
	}
	return max(total/20, 256)
}

// bootNeedMiB is the host memory a box is admitted against.
func bootNeedMiB(cfg BoxConfig) int64 { return int64(cfg.MemoryMiB + vmmOverheadMiB) }

// checkHostMemory refuses a box that needs more memory than the host has.
func checkHostMemory(cfg BoxConfig) error {
	total, err := meminfoMiB("MemTotal")
	if err != nil {
		return nil // no /proc/meminfo: nothing to judge by
	}
	if need := bootNeedMiB(cfg); need > total {
		return errdefs.Errorf(errdefs.ErrLimit, "box needs %d MiB of host memory (%d MiB guest + %d MiB VMM), the host has %d MiB",
			need, cfg.MemoryMiB, vmmOverheadMiB, total)
	}
	return nil
}

// admitBoot waits for a boot slot and for the memory a box needing needMiB
// takes, until ctx ends; release frees the slot.
func (r *Runtime) admitBoot(ctx context.Context, boxID string, needMiB int64) (release func(), err error) {
	dir := filepath.Join(r.home, "state", "boot")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	var short string // why the last pass did not admit, when it was memory
	for {
		slot, inFlight, err := r.takeSlot(dir)
		if err != nil {
			return nil, err
		}
		if slot != nil {
			avail, merr := meminfoMiB("MemAvailable")
			free := avail - inFlight - r.memReserve
			if merr != nil || free >= needMiB {
				slot.Truncate(0)
				slot.WriteAt([]byte(strconv.FormatInt(needMiB, 10)), 0)
				return func() { unix.Flock(int(slot.Fd()), unix.LOCK_UN); slot.Close() }, nil
			}
			unix.Flock(int(slot.Fd()), unix.LOCK_UN)
			slot.Close()
			short = fmt.Sprintf("it needs %d MiB of host memory; %d MiB are available, %d MiB of which are promised to boots in flight and %d MiB kept for the host",
				needMiB, avail, inFlight, r.memReserve)
		}
		select {
		case <-ctx.Done():
			waited := time.Since(start).Round(time.Millisecond)
			if short != "" {
				return nil, errdefs.Errorf(errdefs.ErrLimit, "start box %s: waited %s for host memory: %s: %v", boxID, waited, short, ctx.Err())
			}
			return nil, errdefs.Errorf(errdefs.ErrTimeout, "start box %s: waited %s for one of the %d boot slots (other boxes are booting): %v",
				boxID, waited, r.maxBoots, ctx.Err())
		case <-time.After(admitPoll):
		}
	}
}

// takeSlot locks a free boot slot, if one is free, and sums the memory
// the slots held by other boots need.
func (r *Runtime) takeSlot(dir string) (slot *os.File, inFlightMiB int64, err error) {
	for i := 0; i < r.maxBoots; i++ {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			if slot != nil {
				slot.Close()
			}
			return nil, 0, err
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			var b [20]byte
			n, _ := f.ReadAt(b[:], 0)
			if v, err := strconv.ParseInt(string(b[:n]), 10, 64); err == nil && v > 0 {
				inFlightMiB += v
			}
			f.Close()
			continue
		}
		if slot == nil {
			slot = f
			continue
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	return slot, inFlightMiB, nil
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
