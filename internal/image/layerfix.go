package image

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// OCI whiteout names (image-spec layer.md).
const (
	whPrefix = ".wh."
	whOpaque = ".wh..wh..opq"
)

// fixLayer copies the layer tar r to w, rewritten so that tar2ext4 turns it
// into the file system the OCI rules describe:
//
//   - Whiteouts go last. A whiteout hides only lower layers' files, but
//     tar2ext4 makes it a 0:0 character device at once, and then fails on an
//     entry of the same name in the same layer ("cannot replace a file with a
//     directory"): a file replaced by a directory comes as `.wh.x` then `x/`.
//     Moved to the end, a whiteout of a path the layer itself has becomes the
//     opaque marker when that is a directory (the lower one must not show
//     through) and is dropped otherwise (an upper non-directory hides anything).
//   - A hard link to a file that is not earlier in this layer (one in a lower
//     layer) is refused with ErrUnsupported: tar2ext4 can only link within the
//     file system it writes, and would fail with "file not found".
//   - Times before 1970 and after 2038 are shifted so that tar2ext4 stores
//     them right (see ext4Time).
//   - GNU sparse files, which the reader expands, are written as regular files,
//     and PAX global headers (git archive writes one) are left out, not made
//     into a file, as containerd does.
//   - Device nodes (character and block) are dropped: a box's devices are
//     the ones its agent makes in the box's own /dev, never an image's (a
//     node for the VM's disks or console would hand them to a box without
//     CAP_MKNOD), and so are hard links to them. The one exception is the
//     overlay form of a whiteout, a 0:0 character device, which is taken as
//     the OCI whiteout of its name (as Docker's overlay2 driver would see it).
//   - Types without data (directories, links, fifos) get size 0, so that a
//     size they declare never reaches tar2ext4.
//
// It reads the layer through tr, which enforces the store's Limits; what it
// writes is bounded by what it reads (plus one small entry per whiteout).
// Entry names never become host paths: tar2ext4 resolves them (cleaned,
// against the image's root, through no symlink) inside the file system it
// writes, and device nodes are only inodes there.
func fixLayer(w io.Writer, tr *layerReader) error {
	bw := bufio.NewWriterSize(w, 256<<10) // fewer, larger writes to the pipe to tar2ext4
	tw := tar.NewWriter(bw)
	kinds := map[string]byte{}     // cleaned path -> 'd' or 'f', for every entry and implied parent
	whiteouts := map[string]bool{} // cleaned paths the layer whites out
	devices := map[string]bool{}   // cleaned paths of the device nodes dropped
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // no file: tar2ext4 would make one named after it (pax_global_header)
		}
		name := cleanPath(hdr.Name)
		if name == "" {
			if hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("layer entry %q names the root but is not a directory: %w", hdr.Name, errdefs.ErrInvalidArgument)
			}
		} else {
			for p := path.Dir(name); p != "."; p = path.Dir(p) {
				if kinds[p] == 'd' {
					break
				}
				kinds[p] = 'd'
			}
		}
		dir, base := path.Split(name)
		if base == whOpaque {
			// An opaque marker goes through where it is: tar2ext4 only sets an
			// xattr on the directory, and keeps it when the directory's own
			// entry comes later.
		} else if target, ok := strings.CutPrefix(base, whPrefix); ok {
			whiteouts[path.Join(dir, target)] = true
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeChar, tar.TypeBlock:
			if base == whOpaque {
				hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeReg, 0, 0 // tar2ext4 reads the marker by its name
				break
			}
			if hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0 {
				whiteouts[name] = true
			} else {
				devices[name] = true
			}
			continue
		case tar.TypeDir:
			kinds[name] = 'd'
		case tar.TypeLink:
			target := cleanPath(hdr.Linkname)
			if devices[target] {
				devices[name] = true // a second name of a dropped device
				continue
			}
			if kinds[target] != 'f' {
				return fmt.Errorf("hard link %s to %s, which is not a file earlier in this layer (hard links across layers): %w",
					name, target, errdefs.ErrUnsupported)
			}
			kinds[name] = 'f'
		case tar.TypeGNUSparse:
			hdr.Typeflag = tar.TypeReg
			kinds[name] = 'f'
		default:
			kinds[name] = 'f'
		}
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") { // the reader has expanded the file already
				delete(hdr.PAXRecords, k)
			}
		}
		if dataSize(hdr) == 0 {
			hdr.Size = 0
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = ext4Time(hdr.ModTime), ext4Time(hdr.AccessTime), ext4Time(hdr.ChangeTime)
		hdr.Format = tar.FormatPAX // keeps nanoseconds and big numbers; tar2ext4 reads it all
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(whiteouts))
	for p := range whiteouts {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX}
		switch kinds[p] {
		case 'd':
			hdr.Name = path.Join(p, whOpaque)
		case 'f':
			continue
		default:
			dir, base := path.Split(p)
			hdr.Name = dir + whPrefix + base
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// cleanPath is a tar entry name as a relative path without "./" or a
// trailing slash; "" for the root.
func cleanPath(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// ext4Time returns the time to give tar2ext4 for t so that the file system
// says t. ext4 keeps the low 32 bits of the seconds, read back sign-extended,
// and in two "epoch" bits how many times 2^32 to add; tar2ext4 stores bits
// 32-33 of the seconds there instead, so times before 1970 come out with every
// epoch and nanosecond bit set (2378 and an invalid nanosecond count), and
// those from 2038 to 2106 come out 2^32 seconds early (1901 to 1969). The
// time whose bits 32-33 are the right epoch is stored right. Times that ext4
// cannot hold (before 1901 or after 2446) are left for tar2ext4 to clamp.
func ext4Time(t time.Time) time.Time {
	s := t.Unix()
	if t.IsZero() || s < -1<<31 || s >= 3<<32+1<<31 {
		return t
	}
	epoch := (s - int64(int32(s))) >> 32
	if fixed := int64(uint32(s)) + epoch<<32; fixed != s {
		return time.Unix(fixed, int64(t.Nanosecond()))
	}
	return t
}
