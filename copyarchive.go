package boxlite

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// CopyInArchive extracts the tar archive read from r into the box directory
// boxDst (made, with its parents, if missing), as BoxLite's REST upload
// does: the archive's entries land at boxDst/<entry name>. With
// CopyOptions.ArchiveOneFile the archive holds one file (or symlink), placed
// as CopyIn places a file: into boxDst if it is a directory or ends in "/",
// else as boxDst. The archive is
// read once, as it arrives, and re-encoded on the way: only regular files,
// directories, symlinks and hard links pass, a name that is absolute or
// climbs with ".." fails the copy with ErrInvalidArgument, and
// CopyOptions.MaxBytes and MaxEntries cap it (0: none) with ErrLimit.
// NoOverwrite fails the copy when an entry exists.
func (b *Box) CopyInArchive(ctx context.Context, r io.Reader, boxDst string, opts CopyOptions) error {
	what := fmt.Sprintf("copy in an archive -> %s", boxDst)
	if boxDst == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	tr := tar.NewReader(r)
	req := protocol.CopyIn{Dest: boxDst, Overwrite: !opts.NoOverwrite}
	var first *tar.Header
	if opts.ArchiveOneFile {
		h, err := tr.Next()
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the archive holds no file: %v", what, err)
		}
		name, err := archiveName(h.Name)
		if err != nil || name == "." || strings.Contains(name, "/") || (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink) {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the archive must hold one file at its top level, not %q", what, truncateName(h.Name))
		}
		first, req.Name = h, name
	} else if opts.ArchiveOneDir {
		h, err := tr.Next()
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the archive holds no directory: %v", what, err)
		}
		name, err := archiveName(h.Name)
		name = strings.TrimSuffix(name, "/")
		if err != nil || name == "." || strings.Contains(name, "/") || h.Typeflag != tar.TypeDir {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the archive must start with one directory at its top level, not %q", what, truncateName(h.Name))
		}
		first, req.Name = h, name
		if opts.Layout == LayoutBoxLite && !strings.HasSuffix(boxDst, "/") {
			req.Dest += "/" // the agent makes it and puts the directory inside
		}
	}
	return b.sendArchive(ctx, what, req, func(w io.Writer) error {
		return recodeFrom(w, tr, first, opts.ArchiveOneFile, opts.limits(false), "the archive")
	})
}

// CopyOutArchive writes a tar archive of the box path boxSrc to w, named as
// CopyOut would place it (the source's own name, or with ContentsOnly or a
// source ending in "/." its entries). What the box sends is hostile: it is
// re-encoded entry by entry, a name that is absolute or climbs with ".."
// fails the copy, device nodes and FIFOs are left out, and
// CopyOptions.MaxBytes and MaxEntries cap it (defaults as CopyOut's).
// Nothing reaches the host's file system.
func (b *Box) CopyOutArchive(ctx context.Context, boxSrc string, w io.Writer, opts CopyOptions) error {
	what := fmt.Sprintf("copy out %s as an archive", boxSrc)
	if boxSrc == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	contents := opts.ContentsOnly || strings.HasSuffix(boxSrc, "/.")
	if !contents {
		if base := path.Base(path.Clean("/" + boxSrc)); base == "/" || base == "." || base == ".." {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %s names no file; copy a directory's contents with ContentsOnly", what, boxSrc)
		}
	}
	req := protocol.CopyOut{Src: boxSrc, Contents: contents, Follow: opts.FollowSymlinks}
	return b.receiveArchive(ctx, what, req, func(r io.Reader) error {
		return recodeArchive(w, tar.NewReader(r), nil, opts.limits(true), "the box's archive")
	})
}

// recodeArchive copies the tar archive tr to dst entry by entry, within
// lim, keeping files, directories and links with their modes and times.
// With only (an entry read already), that entry is all the archive may hold.
func recodeArchive(dst io.Writer, tr *tar.Reader, only *tar.Header, lim filecopy.Limits, whose string) error {
	return recodeFrom(dst, tr, only, only != nil, lim, whose)
}

// recodeFrom is recodeArchive whose first entry, already read, is first
// (nil: none read); with one, it must be the archive's only entry.
func recodeFrom(dst io.Writer, tr *tar.Reader, first *tar.Header, one bool, lim filecopy.Limits, whose string) error {
	tw := tar.NewWriter(dst)
	var entries, bytes int64
	for {
		var h *tar.Header
		var err error
		switch {
		case first != nil && entries == 0:
			h = first
		case one:
			if _, err = tr.Next(); err == nil {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s holds more than the one file it should", whose)
			}
		default:
			h, err = tr.Next()
		}
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, tar.ErrFieldTooLong) {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is not a valid tar archive: %v", whose, err)
			}
			return err
		}
		name, err := archiveName(h.Name)
		if err != nil {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v", whose, err)
		}
		if name == "." {
			continue // the destination itself
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			if h.Linkname, err = archiveName(h.Linkname); err != nil {
				return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: hard link %q: %v", whose, h.Name, err)
			}
		default:
			continue // devices, FIFOs and the like are not copied
		}
		entries++
		bytes += max(h.Size, 0)
		if lim.MaxEntries > 0 && entries > lim.MaxEntries {
			return errdefs.Errorf(errdefs.ErrLimit, "%s has more than %d entries", whose, lim.MaxEntries)
		}
		if lim.MaxBytes > 0 && bytes > lim.MaxBytes {
			return errdefs.Errorf(errdefs.ErrLimit, "%s holds more than %d bytes of file data", whose, lim.MaxBytes)
		}
		out := &tar.Header{
			Typeflag: h.Typeflag, Name: name, Linkname: h.Linkname, Size: h.Size,
			Mode: h.Mode & 0o7777, ModTime: h.ModTime, Format: tar.FormatPAX,
		}
		if h.Typeflag != tar.TypeReg {
			out.Size = 0
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if out.Size > 0 {
			if _, err := io.CopyN(tw, tr, out.Size); err != nil {
				if err == io.EOF {
					err = errdefs.Errorf(errdefs.ErrInvalidArgument, "%s ends inside %q", whose, h.Name)
				}
				return err
			}
		}
	}
}

func truncateName(n string) string {
	if len(n) > 200 {
		return n[:200] + "..."
	}
	return n
}

// archiveName is an entry's name made clean and relative, or an error for
// one that is empty, absolute, or climbs out with "..".
func archiveName(n string) (string, error) {
	if n == "" || strings.ContainsRune(n, 0) || len(n) > filecopy.MaxName {
		return "", fmt.Errorf("entry name %q is empty or invalid", n)
	}
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("entry name %q is absolute", n)
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("entry name %q climbs out with ..", n)
	}
	if strings.HasSuffix(n, "/") && c != "." {
		c += "/"
	}
	return c, nil
}
