package sparse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Extent is a run of data in a sparse file.
type Extent struct {
	Off int64 `json:"off"`
	Len int64 `json:"len"`
}

// Extents lists f's data, in order, up to size. On a file system without
// SEEK_DATA the whole file is one extent.
func Extents(f *os.File, size int64) ([]Extent, error) {
	var out []Extent
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return []Extent{{0, size}}, nil
		}
		if err != nil {
			return nil, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		hole = min(hole, size)
		if hole > data {
			out = append(out, Extent{data, hole - data})
		}
		off = hole
	}
	return out, nil
}

// page is the unit CopyData skips when it holds only zeros.
const page = 4096

// CopyData copies src's data up to size into the empty file dst at the
// same offsets and sizes dst to size. It skips src's holes and the pages of
// its data that hold only zeros (guest memory is mostly such pages), so
// dst's holes read as they did in src.
func CopyData(ctx context.Context, dst, src *os.File, size int64) error {
	exts, err := Extents(src, size)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, e := range exts {
		for off := e.Off; off < e.Off+e.Len; {
			if err := ctx.Err(); err != nil {
				return errdefs.Errorf(errdefs.ErrTimeout, "copy of %s cancelled: %v", src.Name(), err)
			}
			n, err := src.ReadAt(buf[:min(int64(len(buf)), e.Off+e.Len-off)], off)
			if n == 0 && err != nil {
				return err
			}
			if err := writeNonZero(dst, buf[:n], off); err != nil {
				return err
			}
			off += int64(n)
		}
	}
	return dst.Truncate(size)
}

// writeNonZero writes b at off, leaving out its runs of zero pages.
func writeNonZero(dst *os.File, b []byte, off int64) error {
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && !zero(b[j:min(j+page, len(b))]) {
			j += page
		}
		j = min(j, len(b))
		if j > i {
			if _, err := dst.WriteAt(b[i:j], off+int64(i)); err != nil {
				return err
			}
		}
		for j < len(b) && zero(b[j:min(j+page, len(b))]) {
			j += page
		}
		i = min(j, len(b))
	}
	return nil
}

var zeros [page]byte

func zero(b []byte) bool { return bytes.Equal(b, zeros[:len(b)]) }

// Copy copies the regular file src to the new file dst: a reflink
// (FICLONE) where the file system shares blocks, else only src's data
// extents, leaving holes as holes. dst is synced; on error it is removed.
func Copy(ctx context.Context, src, dst string) (err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errdefs.Errorf(errdefs.ErrInvalidState, "%s is not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return out.Sync()
	}
	if err := CopyData(ctx, out, in, fi.Size()); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Sync()
}
