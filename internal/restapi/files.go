package restapi

import (
	"archive/tar"
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	path2 "path"
	"path/filepath"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// boxPath checks a path inside the box given in a query: it is the box's
// to resolve (in the box), never the server's, but it must be absolute and
// plain.
func boxPath(q map[string]string) (string, error) {
	p, ok := q["path"]
	if !ok || p == "" {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "query parameter path is required")
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "path %q: want an absolute path in the box", truncate(p))
	}
	return p, nil
}

func (a *API) uploadFiles(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "path", "overwrite", "source_is_dir", "layout")
	if err != nil {
		return err
	}
	layout := q["layout"]
	if layout != "" && layout != "docker" && layout != "boxlite" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "query parameter layout=%q: want docker or boxlite", truncate(layout))
	}
	_, given := q["source_is_dir"]
	isDir, err := boolParam(q, "source_is_dir", true)
	if err != nil {
		return err
	}
	dst, err := boxPath(q)
	if err != nil {
		return err
	}
	overwrite, err := boolParam(q, "overwrite", true)
	if err != nil {
		return err
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, a.lim.TransferBytes+1<<20) // the archive's headers on top
	if !given {
		// Clients before source_is_dir (BoxLite's Node 0.10.0) send a
		// file as an archive of that one file, meant to land as path: the
		// upload is spooled to tell one file from a directory's entries.
		f, oneFile, err := a.spoolArchive(w, r)
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		body, isDir = f, !oneFile
	}
	opts := boxlite.CopyOptions{NoOverwrite: !overwrite, ArchiveOneFile: !isDir, MaxBytes: a.lim.TransferBytes, MaxEntries: boxlite.DefaultCopyOutMaxEntries}
	if layout != "" && isDir {
		// boxlite's: the archive is one directory, placed by the layout's
		// rules (docker: it becomes a path that does not exist yet).
		opts.ArchiveOneDir, opts.Layout = true, boxlite.LayoutBoxLite
		if layout == "docker" {
			opts.Layout = boxlite.LayoutDocker
		}
	}
	if err := b.CopyInArchive(r.Context(), bufio.NewReaderSize(body, 64<<10), dst, opts); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// spoolArchive writes an upload to a spool file (open, at its start) and
// says whether it is an archive of one file at its top level.
func (a *API) spoolArchive(w http.ResponseWriter, r *http.Request) (*os.File, bool, error) {
	path, err := a.spoolBody(r.Context(), w, r, "upload-*.tar")
	if err != nil {
		return nil, false, err
	}
	f, err := os.Open(path)
	if err != nil {
		os.Remove(path)
		return nil, false, err
	}
	tr := tar.NewReader(bufio.NewReader(f))
	oneFile := false
	if h, err := tr.Next(); err == nil && (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink) && !strings.Contains(strings.Trim(path2.Clean(h.Name), "/"), "/") {
		_, err := tr.Next()
		oneFile = err == io.EOF
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(path)
		return nil, false, err
	}
	return f, oneFile, nil
}

// downloadFiles streams the box's archive of a path. The archive goes to
// a spool file first, so an error in the box answers an error body rather
// than a cut archive; the spool is bounded like the transfer.
func (a *API) downloadFiles(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "path", "follow_symlinks")
	if err != nil {
		return err
	}
	src, err := boxPath(q)
	if err != nil {
		return err
	}
	follow, err := boolParam(q, "follow_symlinks", false)
	if err != nil {
		return err
	}
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	spool, err := os.CreateTemp(a.tmp, "download-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	opts := boxlite.CopyOptions{FollowSymlinks: follow, MaxBytes: a.lim.TransferBytes}
	bw := bufio.NewWriterSize(spool, 64<<10)
	if err := b.CopyOutArchive(r.Context(), src, bw, opts); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return serveSpool(w, spool, "application/x-tar", "")
}

// serveSpool sends a finished spool file.
func serveSpool(w http.ResponseWriter, f *os.File, ctype, name string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", itoa(st.Size()))
	if name != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+filepath.Base(name)+`"`)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f) // a client that leaves mid-way only loses its copy
	return nil
}

// spoolBody writes a request body to a temporary file within max bytes.
func (a *API) spoolBody(ctx context.Context, w http.ResponseWriter, r *http.Request, pattern string) (string, error) {
	f, err := os.CreateTemp(a.tmp, pattern)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, a.lim.TransferBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if _, ok := err.(*http.MaxBytesError); ok {
			return "", TooLarge("upload over " + itoa(a.lim.TransferBytes) + " bytes")
		}
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "reading the upload: %v", err)
	}
	return f.Name(), ctx.Err()
}
