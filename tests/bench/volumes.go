package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
	"github.com/boxlite/boxlite/tests/internal/proc"
)

// volumes prints the figures of host folders in boxes, each next to the
// same work on the host in the same run: sequential write and read of
// 256 MiB and an untar of a source tree (the Go module cache's golang.org
// modules) into a volume, with the box's own disk for context (busybox dd
// and tar on both sides); and boot time and host RSS of a box with one
// volume (guest RAM in a shared memfd, plus a virtiofsd) against one
// without.
func volumes() error {
	ctx, rt, done, err := timedImageRuntime(20 * time.Minute)
	if err != nil {
		return err
	}
	defer done()
	work, err := os.MkdirTemp("", "bxvol")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	vol, host := filepath.Join(work, "vol"), filepath.Join(work, "host")
	for _, d := range []string{vol, host} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}

	// Boot and RSS, alternating so that drift hits both alike.
	var plainBoot, volBoot []time.Duration
	var plainRSS, volRSS [3]int // shim, QEMU, virtiofsd in KiB (last boot)
	for range boots {
		for _, withVol := range []bool{false, true} {
			opts := []boxlite.BoxOption{}
			if withVol {
				opts = append(opts, boxlite.WithVolume(vol, "/vol", false))
			}
			t0 := time.Now()
			b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", opts...)
			if err != nil {
				return err
			}
			if _, err := b.Run(ctx, boxlite.Command{Argv: []string{"true"}}); err != nil {
				return err
			}
			d := time.Since(t0)
			time.Sleep(2 * time.Second) // idle
			ri := b.Info().Runtime
			rss := [3]int{rssKB(ri.ShimPid), rssKB(ri.VMMPid), 0}
			for _, p := range proc.ChildrenNamed(ri.ShimPid, "virtiofsd") {
				rss[2] += rssKB(p)
			}
			if withVol {
				volBoot, volRSS = append(volBoot, d), rss
			} else {
				plainBoot, plainRSS = append(plainBoot, d), rss
			}
			b.Remove(ctx, true)
		}
	}
	rec.vs("create to first exec (512 MiB guest) with a volume", msf(median(volBoot)), "ms", "without", msf(median(plainBoot)), nil)
	mib := func(kb int) float64 { return float64(kb) / 1024 }
	rec.vs("idle host RSS with a volume (shim + QEMU + virtiofsd)", mib(volRSS[0]+volRSS[1]+volRSS[2]), "MiB", "without (shim + QEMU)", mib(plainRSS[0]+plainRSS[1]), nil)
	rec.vs("  QEMU RSS with a volume", mib(volRSS[1]), "MiB", "without", mib(plainRSS[1]), nil)
	rec.add("  virtiofsd RSS", mib(volRSS[2]), "MiB", nil)

	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithVolume(vol, "/vol", false))
	if err != nil {
		return err
	}
	defer b.Remove(ctx, true)
	inBox := func(script string) (time.Duration, error) {
		t0 := time.Now()
		res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", script}})
		if err == nil && res.Code != 0 {
			err = fmt.Errorf("box: %q: code %d: %s", script, res.Code, res.Stderr)
		}
		return time.Since(t0), err
	}
	onHost := func(script string) (time.Duration, error) {
		t0 := time.Now()
		out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("host: %q: %v: %s", script, err, out)
		}
		return time.Since(t0), err
	}
	const mb = 256
	ratio := func(what string, box, base time.Duration, disk time.Duration) {
		rec.vs(what+": volume", msf(box), "ms", "host", msf(base), nil)
		if disk > 0 {
			rec.vs(what+": box disk", msf(disk), "ms", "host", msf(base), nil)
		}
	}
	dd := "busybox dd if=/dev/zero of=%s bs=1M count=" + strconv.Itoa(mb) + " conv=fsync 2>/dev/null"
	wBox, err := inBox(fmt.Sprintf(strings.Replace(dd, "busybox ", "", 1), "/vol/w"))
	if err != nil {
		return err
	}
	wDisk, err := inBox(fmt.Sprintf(strings.Replace(dd, "busybox ", "", 1), "/root/w"))
	if err != nil {
		return err
	}
	wHost, err := onHost(fmt.Sprintf(dd, filepath.Join(host, "w")))
	if err != nil {
		return err
	}
	ratio("sequential write 256 MiB (fsync)", wBox, wHost, wDisk)
	// A file the guest has not cached (the host wrote it), read from the
	// host's page cache, as the host read is.
	if _, err := onHost(fmt.Sprintf(dd, filepath.Join(vol, "r"))); err != nil {
		return err
	}
	rBox, err := inBox("dd if=/vol/r of=/dev/null bs=1M 2>/dev/null")
	if err != nil {
		return err
	}
	rHost, err := onHost("busybox dd if=" + filepath.Join(vol, "r") + " of=/dev/null bs=1M 2>/dev/null")
	if err != nil {
		return err
	}
	ratio("sequential read 256 MiB (uncached in the guest)", rBox, rHost, 0)
	inBox("rm -f /vol/w /vol/r /root/w")

	// Metadata: untar a source tree into the volume.
	src := filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod", "golang.org")
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		src = filepath.Join(strings.TrimSpace(string(out)), "golang.org")
	}
	tarball := filepath.Join(vol, "src.tar")
	if _, err := onHost(fmt.Sprintf("tar -cf %s -C %s .", tarball, filepath.Dir(src)+"/"+filepath.Base(src))); err != nil {
		return err
	}
	files, _ := onHostCount(src)
	xBox, err := inBox("mkdir /vol/x && tar -xf /vol/src.tar -C /vol/x && sync")
	if err != nil {
		return err
	}
	xDisk, err := inBox("mkdir /root/x && tar -xf /vol/src.tar -C /root/x && sync")
	if err != nil {
		return err
	}
	xHost, err := onHost(fmt.Sprintf("mkdir %s/x && busybox tar -xf %s -C %s/x && sync", host, tarball, host))
	if err != nil {
		return err
	}
	name := fmt.Sprintf("untar %d files (%s)", files, src)
	rec.vs(name+": volume", msf(xBox), "ms", "host", msf(xHost), nil)
	rec.vs(name+": box disk", msf(xDisk), "ms", "host", msf(xHost), nil)
	return nil
}

func onHostCount(dir string) (int, error) {
	n := 0
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return nil
	})
	return n, err
}
