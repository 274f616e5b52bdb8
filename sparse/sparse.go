package sparse

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// CopyData copies src's data extents up to size into dst at the same
// offsets (dst's holes stay holes) and sizes dst to size.
func CopyData(ctx context.Context, dst, src *os.File, size int64) error {
	exts, err := Extents(src, size)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, e := range exts {
		if err := ctx.Err(); err != nil {
			return errdefs.Errorf(errdefs.ErrTimeout, "copy of %s cancelled: %v", src.Name(), err)
		}
		if _, err := io.CopyBuffer(io.NewOffsetWriter(dst, e.Off), io.NewSectionReader(src, e.Off, e.Len), buf); err != nil {
			return err
		}
	}
	return dst.Truncate(size)
}

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
