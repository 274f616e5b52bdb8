package boxlite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// Volume is a host directory or file mounted in a box over virtio-fs.
type Volume = shimapi.Volume

// MaxVolumes is how many volumes one box may have. They share two devices
// (one read-write, one read-only) whatever their number; the bound is the
// kernel command line that names them (see maxVolumePathBytes).
const MaxVolumes = 32

// maxVolumePathBytes bounds the escaped guest paths of a box's volumes
// together: they travel on the guest kernel command line (2047 bytes).
const maxVolumePathBytes = 1200

// WithVolume mounts the host directory or file hostPath at guestPath (an
// absolute path in the box) read-write, or read-only when readOnly is set;
// the host refuses writes to a read-only volume, not only the guest. Files
// the box creates belong on the host to the user running boxlite, and get
// no set-user-ID or set-group-ID bit; the box cannot make device nodes or
// set extended attributes there. A missing mount point is created in the
// box. Default: no volumes; at most MaxVolumes.
//
// hostPath is resolved once, at create (symlinks followed then), and the
// box keeps that file: a later start refuses, with an error naming the
// volume, when the path has a symlink on the way or leads to another file
// (see shimapi.Volume).
func WithVolume(hostPath, guestPath string, readOnly bool) BoxOption {
	return WithVolumeSpec(Volume{HostPath: hostPath, GuestPath: guestPath, ReadOnly: readOnly})
}

// WithVolumeSpec mounts v as WithVolume does, with its other settings:
// SizeLimitBytes bounds what the box may store in a read-write directory
// volume (0, the default: no limit; see docs/SECURITY.md for what the
// bound guarantees). v.HostID is ignored (recorded at create).
func WithVolumeSpec(v Volume) BoxOption {
	return func(c *BoxConfig) error {
		v.HostID = nil
		c.Volumes = append(c.Volumes, v)
		return nil
	}
}

// MinVolumeSizeLimit is the smallest size limit of a volume.
const MinVolumeSizeLimit = 1 << 20

// validateVolumes checks the volumes, resolves their host paths and
// records their host files' identities. A volume that already has one (a
// clone's) keeps it: its path is opened following no symlink and must
// still lead to that file.
func (c *BoxConfig) validateVolumes() error {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "box options: "+format, args...)
	}
	if len(c.Volumes) > MaxVolumes {
		return bad("%d volumes, at most %d", len(c.Volumes), MaxVolumes)
	}
	seen := map[string]bool{}
	var words []string
	for i := range c.Volumes {
		v := &c.Volumes[i]
		g := v.GuestPath
		switch {
		case v.HostPath == "" || strings.ContainsRune(v.HostPath, 0):
			return bad("volume %q: host path is empty or has a NUL", g)
		case !path.IsAbs(g) || path.Clean(g) != g || strings.ContainsAny(g, "\x00\n"):
			return bad("volume guest path %q must be absolute and clean", g)
		case g == "/" || underAny(g, "/proc", "/sys", "/dev"):
			return bad("volume guest path %q would cover / or the box's /proc, /sys or /dev", g)
		case seen[g]:
			return bad("volume guest path %q is used twice", g)
		}
		seen[g] = true
		// The word as the shim writes it (the index and kind at their longest).
		words = append(words, protocol.VolumeWord{Index: i, ReadOnly: true, GuestPath: g}.String())
		abs, err := filepath.Abs(v.HostPath)
		if err != nil {
			return bad("volume %s: host path %q: %v", g, v.HostPath, err)
		}
		if v.HostID == nil {
			// Resolved once, here; starts never follow a symlink.
			real, err := filepath.EvalSymlinks(abs)
			if errors.Is(err, os.ErrNotExist) {
				return errdefs.Errorf(errdefs.ErrNotFound, "box options: volume %s: host path %q does not exist", g, v.HostPath)
			} else if err != nil {
				return bad("volume %s: host path %q: %v", g, v.HostPath, err)
			}
			abs = real
		}
		f, id, err := shimapi.OpenVolume(Volume{HostPath: abs, GuestPath: g, HostID: v.HostID})
		if err != nil {
			return fmt.Errorf("box options: %w", err)
		}
		f.Close()
		switch {
		case v.SizeLimitBytes < 0:
			return bad("volume %s: negative size limit", g)
		case v.SizeLimitBytes > 0 && (v.ReadOnly || id.Type != "dir"):
			return bad("volume %s: a size limit is for a read-write directory", g)
		case v.SizeLimitBytes > 0 && v.SizeLimitBytes < MinVolumeSizeLimit:
			return bad("volume %s: size limit %d bytes is below %d", g, v.SizeLimitBytes, MinVolumeSizeLimit)
		}
		v.HostPath, v.HostID = abs, &id
	}
	if total := protocol.CmdlineLen(words...); total > maxVolumePathBytes {
		return bad("the volumes' guest paths are too long together (%d bytes on the kernel command line, limit %d)", total, maxVolumePathBytes)
	}
	return nil
}

func underAny(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// virtiofsd is the file daemon that serves volumes: beside boxlite-shim,
// else virtiofsd on PATH; "" when neither exists.
func (a assets) virtiofsd() string {
	p := filepath.Join(a.dir, "virtiofsd")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if p, err := exec.LookPath("virtiofsd"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return ""
}
