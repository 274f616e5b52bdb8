//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/protocol"
)

// Volumes: the host serves the box's read-write volumes on the virtio-fs
// tag boxlite-rw and the read-only ones on boxlite-ro, volume N as the
// entry N of the file system's root, and names each on the kernel command
// line as boxlite.vol=N:rw|ro:d|f:GUESTPATH (URL path escaped). The agent
// mounts each tag once under volDir and binds every volume to its guest
// path inside the box root before the sandbox starts, so every box
// process sees them.
const volDir = boxDir + "/vol" // volDir/rw, volDir/ro

// volume is one volume the host named on the kernel command line.
type volume = protocol.VolumeWord

// parseVolumes reads the volume words of the kernel command line.
func parseVolumes(cmdline string) ([]volume, error) {
	return protocol.ParseVolumeWords(splitCmdline(cmdline))
}

// volumeFlags: a volume holds no device the box can open and no set-id
// program it can run with more than its own rights, whatever the host
// folder holds.
const volumeFlags = unix.MS_NOSUID | unix.MS_NODEV

// mountVolumes mounts the volumes in the box root, parents before children.
func (b *box) mountVolumes(vols []volume) error {
	if len(vols) == 0 {
		return nil
	}
	if b.Root == "" {
		return errors.New("volumes: the box has no root file system")
	}
	for _, ro := range []bool{false, true} {
		tag, dir, flags := protocol.FSTagRW, filepath.Join(volDir, "rw"), uintptr(volumeFlags)
		if ro {
			tag, dir, flags = protocol.FSTagRO, filepath.Join(volDir, "ro"), flags|unix.MS_RDONLY
		}
		used := false
		for _, v := range vols {
			used = used || v.ReadOnly == ro
		}
		if used {
			if err := b.mount(tag, dir, "virtiofs", flags, ""); err != nil {
				return fmt.Errorf("volumes: %w", err)
			}
		}
	}
	sort.SliceStable(vols, func(i, j int) bool {
		return strings.Count(vols[i].GuestPath, "/") < strings.Count(vols[j].GuestPath, "/")
	})
	for _, v := range vols {
		src := filepath.Join(volDir, "rw", strconv.Itoa(v.Index))
		if v.ReadOnly {
			src = filepath.Join(volDir, "ro", strconv.Itoa(v.Index))
		}
		target, err := mountPoint(b.Root, v.GuestPath, v.File)
		if err != nil {
			return fmt.Errorf("volume %s: mount point: %w", v.GuestPath, err)
		}
		if err := b.mount(src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("volume %s: %w", v.GuestPath, err)
		}
		// A bind keeps its source's nosuid and nodev; said again so that
		// no change to the tag's mount can lose them. For a read-only
		// volume the host refuses writes too (virtiofsd --readonly, a
		// read-only bind); the flag makes them fail early with EROFS.
		flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | volumeFlags)
		if v.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount("", target, "", flags, ""); err != nil {
			return fmt.Errorf("volume %s: remount nosuid, nodev: %w", v.GuestPath, err)
		}
	}
	return nil
}

// mountPoint returns the path in the agent's namespace of the box path p
// inside root, resolving symlinks within root (resolveIn) and creating what
// is missing on the box's writable layer: directories, and a file for the
// last component of a single-file volume.
func mountPoint(root, p string, file bool) (string, error) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur, rel := root, "/"
	for i, c := range parts {
		rel = path.Join(rel, c)
		host, err := resolveIn(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			// cur is resolved already: the new entry is inside root.
			host = filepath.Join(cur, c)
			if i == len(parts)-1 && file {
				var f *os.File
				if f, err = os.OpenFile(host, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o644); err == nil {
					f.Close()
				}
			} else {
				err = os.Mkdir(host, 0o755)
			}
		}
		if err != nil {
			return "", err
		}
		cur = host
	}
	fi, err := os.Lstat(cur)
	if err != nil {
		return "", err
	}
	if fi.IsDir() == file {
		want := "a directory"
		if file {
			want = "a file"
		}
		return "", fmt.Errorf("%s exists in the image and is not %s", p, want)
	}
	return cur, nil
}
