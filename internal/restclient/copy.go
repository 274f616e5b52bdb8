package restclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
)

// transferTimeout bounds one file transfer (the caller's context may bound
// it more: the copy options' timeout).
const transferTimeout = time.Hour

// CopyIn copies the host file or directory hostSrc into the box through
// PUT /boxes/{id}/files, as a tar archive made here: a file is placed as
// boxDst (or into it, if a directory), a directory by opts.Layout as the
// local runtime places it (LayoutDocker through boxlite serve's layout
// parameter; LayoutBoxLite: in boxDst under its own name, boxDst made if
// missing), a directory's contents (ContentsOnly, "/.") into boxDst.
func (b *Box) CopyIn(ctx context.Context, hostSrc, boxDst string, opts boxlite.CopyOptions) error {
	what := fmt.Sprintf("copy in %s -> %s", hostSrc, boxDst)
	if hostSrc == "" || boxDst == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	dir, name, base, isDir, err := openSource(hostSrc, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer dir.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := filecopy.Send(pw, dir, name, filecopy.SendOptions{Name: base, Limits: filecopy.CopyLimits(opts.MaxBytes, opts.MaxEntries, false)})
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	q := url.Values{"path": {boxPath(boxDst)}, "overwrite": {strconv.FormatBool(!opts.NoOverwrite)},
		"source_is_dir": {strconv.FormatBool(isDir)}}
	if isDir && base != "" && opts.Layout == boxlite.LayoutDocker {
		q.Set("layout", "docker") // boxlite serve's: the directory becomes boxDst when that does not exist
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	resp, err := b.c.send(ctx, request{method: "PUT", path: b.path("/files"), query: q, body: pr, ctype: "application/x-tar"})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return nil
}

// openSource opens what CopyIn sends: the directory holding it and its
// name there, its name in the archive ("" for a directory's contents),
// and whether the archive holds a directory.
func openSource(src string, opts boxlite.CopyOptions) (dir *os.File, name, base string, isDir bool, err error) {
	if opts.ContentsOnly || strings.HasSuffix(src, "/.") || src == "." {
		if dir, err = filecopy.Host().OpenDir(src, false); err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				return nil, "", "", false, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is not a directory (its contents were asked for)", src)
			}
			return nil, "", "", false, errdefs.Errorf(errdefs.ErrNotFound, "%s: no such directory", src)
		}
		return dir, ".", "", true, nil
	}
	base = filepath.Base(filepath.Clean(src))
	if base == "/" || base == "." || base == ".." {
		return nil, "", "", false, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s names no file; copy a directory's contents with ContentsOnly", src)
	}
	if dir, name, err = filecopy.OpenSource(filecopy.Host(), src, opts.FollowSymlinks); err != nil {
		return nil, "", "", false, err
	}
	var st unix.Stat_t
	if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if opts.NoRecursive {
			dir.Close()
			return nil, "", "", false, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is a directory and the copy is not recursive", src)
		}
		isDir = true
	}
	return dir, name, base, isDir, nil
}

// CopyOut copies the box path boxSrc to the host at hostDst in
// CopyOptions.Layout (as the local runtime does), from the server's archive of it
// (GET /boxes/{id}/files). The archive is hostile: it is extracted within
// CopyOptions' caps, never outside hostDst nor through a symlink.
func (b *Box) CopyOut(ctx context.Context, boxSrc, hostDst string, opts boxlite.CopyOptions) error {
	what := fmt.Sprintf("copy out %s -> %s", boxSrc, hostDst)
	if boxSrc == "" || hostDst == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	src := boxPath(boxSrc)
	contents := opts.ContentsOnly || strings.HasSuffix(src, "/.")
	base := ""
	if !contents {
		base = path.Base(path.Clean(src))
		if base == "/" || base == "." || base == ".." {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %s names no file; copy a directory's contents with ContentsOnly", what, boxSrc)
		}
	} else if !strings.HasSuffix(src, "/.") {
		src = strings.TrimSuffix(src, "/") + "/."
	}
	place := filecopy.Place{Base: base, Overwrite: !opts.NoOverwrite}
	// With boxlite.LayoutBoxLite, a directory goes inside a destination that
	// is not one yet and a file becomes it: the archive's first entry says
	// which (as the local runtime decides).
	var t *filecopy.Target
	if opts.Layout != boxlite.LayoutBoxLite || base == "" || strings.HasSuffix(hostDst, "/") || filecopy.IsDir(filecopy.HostNoSymlinks(), hostDst) {
		var err error
		if t, err = filecopy.Prepare(filecopy.HostNoSymlinks(), hostDst, place); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	q := url.Values{"path": {src}}
	if opts.FollowSymlinks {
		q.Set("follow_symlinks", "true")
	}
	resp, err := b.c.send(ctx, request{method: "GET", path: b.path("/files"), query: q})
	var st filecopy.Stats
	if err == nil {
		body := bufio.NewReaderSize(resp.Body, 64<<10)
		if t == nil {
			dst := hostDst
			if filecopy.FirstIsDir(body) {
				dst += "/"
			}
			t, err = filecopy.Prepare(filecopy.HostNoSymlinks(), dst, place)
		}
		if err == nil {
			st, err = t.Extract(body, filecopy.ExtractOptions{Base: base, Limits: filecopy.CopyLimits(opts.MaxBytes, opts.MaxEntries, true), Umask: filecopy.Umask()})
		}
		resp.Body.Close()
		if err != nil && ctx.Err() != nil {
			err = transportError(what, ctx.Err())
		}
	}
	if t == nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err = t.Finish(st, err); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// boxPath is a box path as the API wants it: absolute (the local runtime
// resolves a relative one from the box's /).
func boxPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	return "/" + p
}
