package boxlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"

	"github.com/boxlite/boxlite/internal/abi"
)

// Default caps of a copy out of a box (CopyOptions.MaxBytes, MaxEntries):
// what the box sends is hostile, and the host's disk is not the box's.
const (
	DefaultCopyOutMaxBytes   = abi.DefaultCopyOutMaxBytes
	DefaultCopyOutMaxEntries = abi.DefaultCopyOutMaxEntries
)

// maxTrailing is how much a box may send after the end of its archive.
const maxTrailing = 1 << 20

// CopyOptions control Box.CopyIn and Box.CopyOut. The zero value is docker
// cp's behaviour (BoxLite's CopyOptions defaults: recursive, overwrite, no
// symlinks followed, the source's own name kept).
type CopyOptions struct {
	// NoOverwrite fails with ErrAlreadyExists when the copy's destination
	// exists; by default it is replaced (a directory is merged into).
	NoOverwrite bool
	// FollowSymlinks copies what a symlink named as the source points to
	// (docker cp -L); symlinks below the source are always copied as links.
	FollowSymlinks bool
	// ContentsOnly copies a directory's entries, not the directory
	// (BoxLite include_parent=false); so does a source ending in "/.".
	ContentsOnly bool
	// NoRecursive refuses a directory source (BoxLite recursive=false).
	NoRecursive bool
	// Layout is where a directory source lands: LayoutDocker (the zero
	// value) or LayoutBoxLite.
	Layout CopyLayout
	// ArchiveOneFile: CopyInArchive's archive holds one file, placed as
	// CopyIn places one.
	ArchiveOneFile bool
	// ArchiveOneDir: CopyInArchive's archive holds one directory (its first
	// entry) and what is under it, placed as CopyIn places a directory, by
	// Layout (without it, the archive is extracted into boxDst).
	ArchiveOneDir bool
	// MaxBytes and MaxEntries cap the file data and the entries of one
	// copy; past them it fails with ErrLimit. 0 means the default: for a
	// copy out DefaultCopyOutMaxBytes and DefaultCopyOutMaxEntries, for a
	// copy in none. Negative: no cap.
	MaxBytes, MaxEntries int64
	// Progress, if set, is called from the copying goroutine as data moves
	// (file data and entries so far). It must not block.
	Progress func(CopyProgress)
}

// CopyLayout is where a copied directory lands; files land the same way in
// both (into a directory destination under their own name, else as the
// destination's new name).
type CopyLayout int

const (
	// LayoutDocker is docker cp's: a directory copied to a destination that
	// does not exist becomes that destination (copy_in(dir, "/app") puts
	// dir's entries at /app/...); to an existing directory, it lands inside
	// under its own name.
	LayoutDocker CopyLayout = iota
	// LayoutBoxLite is BoxLite 0.10's: a directory always lands inside the
	// destination under its own name, the destination made if missing
	// (copy_in(dir, "/app") gives /app/dir/..., whether /app existed or not;
	// copy_out("/app", out) gives out/app/...). A directory's contents
	// (ContentsOnly, or a source ending in "/.") go into the destination
	// in both layouts.
	LayoutBoxLite
)

// CopyProgress is how far a copy has got.
type CopyProgress struct {
	Entries int64
	Bytes   int64
}

func (o CopyOptions) limits(out bool) filecopy.Limits {
	return filecopy.CopyLimits(o.MaxBytes, o.MaxEntries, out)
}

func (o CopyOptions) progress() func(filecopy.Stats) {
	if o.Progress == nil {
		return nil
	}
	return func(s filecopy.Stats) { o.Progress(CopyProgress{Entries: s.Entries, Bytes: s.Bytes}) }
}

// CopyIn copies the host file or directory hostSrc into the box at boxDst,
// by docker cp's rules: into boxDst if it is a directory (or ends in "/",
// made if missing), else to boxDst as the copy's new name (its parents made
// as needed). Box paths are absolute or relative to the box's /, and
// resolve as in the box, its symlinks included. Modes, set-id bits, mtimes
// and symlinks are kept, hard links within the source too; the files
// belong to root in the box, as docker cp makes them. Device nodes, FIFOs
// and sockets are skipped. Needs no tar or shell in the image.
func (b *Box) CopyIn(ctx context.Context, hostSrc, boxDst string, opts CopyOptions) error {
	what := fmt.Sprintf("copy in %s -> %s", hostSrc, boxDst)
	if hostSrc == "" || boxDst == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	dir, name, base, err := openHostSource(hostSrc, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer dir.Close()
	if opts.Layout == LayoutBoxLite && base != "" && !strings.HasSuffix(boxDst, "/") && isDirAt(dir, name, opts.FollowSymlinks) {
		boxDst += "/" // the agent makes it and puts the directory inside
	}
	return b.sendArchive(ctx, what, protocol.CopyIn{Dest: boxDst, Name: base, Overwrite: !opts.NoOverwrite}, func(w io.Writer) error {
		_, err := filecopy.Send(w, dir, name, filecopy.SendOptions{Name: base, Limits: opts.limits(false), Progress: opts.progress()})
		return err
	})
}

// sendArchive streams the tar archive write produces to the box as the copy
// in req, through the lane when the box has one free.
func (b *Box) sendArchive(ctx context.Context, what string, req protocol.CopyIn, write func(io.Writer) error) error {
	c, lane, err := b.copyConn(ctx, what)
	if err != nil {
		return err
	}
	s := newCopyStream(c, what)
	var w interface {
		io.Writer
		Flush() error
	}
	if lane != nil {
		defer lane.release()
		req.Lane = lane.slots
		s.send, s.lane = newSendWindow(lane.slots), true
		w = &laneWriter{s: s, l: lane, buf: make([]byte, protocol.LaneSlot)}
	} else {
		s.send = newSendWindow(protocol.InitialWindow)
		w = bufio.NewWriterSize(copyWriter{s}, protocol.MaxChunk)
	}
	if _, err := c.open(s, protocol.TCopyIn, req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.run(ctx, func() error {
		err := write(w)
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = c.send(protocol.TStdinClose, s.id, nil)
		}
		return err
	})
}

// isDirAt reports whether name in dir is a directory (through a symlink
// when follow: OpenSource has resolved a followed one already).
func isDirAt(dir *os.File, name string, follow bool) bool {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if follow {
		flags = 0
	}
	var st unix.Stat_t
	return unix.Fstatat(int(dir.Fd()), name, &st, flags) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// openHostSource opens a copy in's source: its directory and name there,
// and its name in the stream ("" for a directory's contents).
func openHostSource(src string, opts CopyOptions) (dir *os.File, name, base string, err error) {
	if opts.ContentsOnly || strings.HasSuffix(src, "/.") || src == "." {
		if dir, err = filecopy.Host().OpenDir(src, false); err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				return nil, "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is not a directory (its contents were asked for)", src)
			}
			return nil, "", "", errdefs.Errorf(errdefs.ErrNotFound, "%s: no such directory", src)
		}
		return dir, ".", "", nil
	}
	base = filepath.Base(filepath.Clean(src))
	if base == "/" || base == "." || base == ".." {
		return nil, "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s names no file; copy a directory's contents with ContentsOnly", src)
	}
	if dir, name, err = filecopy.OpenSource(filecopy.Host(), src, opts.FollowSymlinks); err != nil {
		return nil, "", "", err
	}
	if opts.NoRecursive {
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			dir.Close()
			return nil, "", "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s is a directory and the copy is not recursive", src)
		}
	}
	return dir, name, base, nil
}

// CopyOut copies the box file or directory boxSrc to the host at hostDst,
// by docker cp's rules: into hostDst if it is a directory, else to hostDst
// as the copy's new name (its parents made as needed). A copy to a new
// name, or over a non-directory, is made beside it and renamed into place
// when complete, so a failed copy leaves nothing; one merged into an
// existing directory leaves what it wrote so far, and its error says so.
//
// What the box sends is hostile: nothing is written outside hostDst or
// through a symlink (one already there or one the copy brought), names are
// relative without "..", hard links only join files of the same copy,
// device nodes and FIFOs are not made, set-id bits are dropped, and the
// files belong to the calling user. hostDst itself is resolved through no
// symlink, whoever made it (an earlier copy out of a box may have): one in
// it fails the copy with ErrInvalidArgument (a *filecopy.SymlinkError
// naming it) before the box sends anything. Modes are kept less the
// process's umask (read once per copy), mtimes and symlinks are kept.
// Caps: CopyOptions.MaxBytes and MaxEntries (ErrLimit).
func (b *Box) CopyOut(ctx context.Context, boxSrc, hostDst string, opts CopyOptions) error {
	what := fmt.Sprintf("copy out %s -> %s", boxSrc, hostDst)
	if boxSrc == "" || hostDst == "" {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: empty path", what)
	}
	contents := opts.ContentsOnly || strings.HasSuffix(boxSrc, "/.")
	base := ""
	if !contents {
		base = path.Base(path.Clean("/" + boxSrc))
		if base == "/" || base == "." || base == ".." {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %s names no file; copy a directory's contents with ContentsOnly", what, boxSrc)
		}
	}
	umask := filecopy.Umask()
	place := filecopy.Place{Base: base, Overwrite: !opts.NoOverwrite}
	// Where it lands is settled (and checked) before the box sends anything,
	// unless it depends on what the source is: with LayoutBoxLite, a
	// directory goes inside a destination that is not one yet, a file
	// becomes it. Then the archive's first entry says which.
	var t *filecopy.Target
	if opts.Layout != LayoutBoxLite || base == "" || strings.HasSuffix(hostDst, "/") || filecopy.IsDir(filecopy.HostNoSymlinks(), hostDst) {
		var err error
		if t, err = filecopy.Prepare(filecopy.HostNoSymlinks(), hostDst, place); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	var st filecopy.Stats
	err := b.receiveArchive(ctx, what, protocol.CopyOut{Src: boxSrc, Contents: contents, Follow: opts.FollowSymlinks}, func(r io.Reader) error {
		if t == nil {
			dst := hostDst
			if filecopy.FirstIsDir(r.(*bufio.Reader)) {
				dst += "/"
			}
			var err error
			if t, err = filecopy.Prepare(filecopy.HostNoSymlinks(), dst, place); err != nil {
				return err
			}
		}
		var err error
		st, err = t.Extract(r, filecopy.ExtractOptions{Limits: opts.limits(true), Progress: opts.progress(), Umask: umask})
		return err
	})
	if t == nil {
		return err
	}
	return t.Finish(st, err)
}

// receiveArchive streams the box's tar archive of the copy out req to read,
// which must consume the archive to its end; after it, only padding may
// follow.
func (b *Box) receiveArchive(ctx context.Context, what string, req protocol.CopyOut, read func(io.Reader) error) error {
	c, lane, err := b.copyConn(ctx, what)
	if err != nil {
		return err
	}
	if lane != nil {
		defer lane.release()
	}
	s := newCopyStream(c, what)
	var src io.Reader
	if lane != nil {
		req.Lane = lane.slots
		s.lrecv = newLaneReader(lane, func() { c.send(protocol.TLaneFree, s.id, protocol.LaneFree{Slots: 1}) })
		src = s.lrecv
	} else {
		s.recv = newWindow(func(n int) { c.send(protocol.TCredit, s.id, protocol.Credit{Fd: 1, Bytes: n}) })
		src = s.recv
	}
	if _, err := c.open(s, protocol.TCopyOut, req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.run(ctx, func() error {
		r := bufio.NewReaderSize(src, protocol.MaxChunk)
		if err := read(r); err != nil {
			return err
		}
		// After the archive's end, only padding is expected.
		if n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailing+1)); err != nil {
			return err
		} else if n > maxTrailing {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "the box sent more than %d bytes after the end of the archive", maxTrailing)
		}
		return nil
	})
}

// copyConn is the box's connection for a copy, if its agent has the
// service, and the lane when the copy may use it (else nil: the channel).
// A configured or stopped box is started first.
func (b *Box) copyConn(ctx context.Context, what string) (*conn, *hostLane, error) {
	c, info, err := b.running(ctx, what)
	if err != nil {
		return nil, nil, err
	}
	hello := info.Hello
	if !hello.Has(protocol.FeatureCopy) {
		return nil, nil, errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s runs an agent without the copy service (%s); restart the box to update it", what, b.rec.ID, hello.Agent)
	}
	return c, b.takeLane(hello), nil
}

// copyStream is the host's end of one copy stream: a copy in sends within
// send, a copy out receives into recv, which bounds what the box may send.
type copyStream struct {
	c     *conn
	id    uint32
	what  string
	recv  *window     // copy out
	lrecv *laneReader // copy out through the lane
	send  *sendWindow // copy in: bytes, or through the lane slots
	// data takes a data frame of a stream that answers one (TRootUsage).
	data func([]byte) error

	lane bool // a copy in through the lane: s.send counts slots

	once sync.Once
	done chan struct{}
	err  error
}

func newCopyStream(c *conn, what string) *copyStream {
	return &copyStream{c: c, what: what, done: make(chan struct{})}
}

func (s *copyStream) bind(id uint32) { s.id = id }

func (s *copyStream) finish(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		if s.recv != nil {
			end := err
			if end == nil {
				end = io.EOF
			}
			s.recv.close(end)
		}
		if s.lrecv != nil {
			end := err
			if end == nil {
				end = io.EOF
			}
			s.lrecv.close(end)
		}
		if s.send != nil {
			end := err
			if end == nil {
				end = errdefs.Errorf(errdefs.ErrClosed, "%s: the box ended the copy", s.what)
			}
			s.send.close(end)
		}
	})
}

func (s *copyStream) frame(f protocol.Frame) {
	var err error
	switch {
	case f.Type == protocol.TStdout && s.recv != nil:
		err = s.recv.push(f.Payload)
	case f.Type == protocol.TStdout && s.data != nil:
		err = s.data(f.Payload)
	case f.Type == protocol.TCredit && s.send != nil && !s.lane:
		var c protocol.Credit
		if err = protocol.Decode(f, &c); err == nil && c.Fd != 0 {
			err = errdefs.Errorf(errdefs.ErrInvalidArgument, "credit for fd %d: a copy in takes credit on fd 0", c.Fd)
		}
		if err == nil {
			err = s.send.give(c.Bytes)
		}
	case f.Type == protocol.TLane && s.lrecv != nil:
		var ch protocol.LaneChunk
		if err = protocol.Decode(f, &ch); err == nil {
			if lerr := s.lrecv.push(ch); lerr != nil {
				s.laneFail(lerr)
				return
			}
		}
	case f.Type == protocol.TLaneFree && s.send != nil && s.lane:
		var lf protocol.LaneFree
		if err = protocol.Decode(f, &lf); err == nil {
			err = s.send.give(lf.Slots)
		}
	case f.Type == protocol.TCopyDone:
		var d protocol.CopyDone
		if err = protocol.Decode(f, &d); err == nil {
			s.finish(nil)
		}
	case f.Type == protocol.TError:
		var pe protocol.Error
		if err = protocol.Decode(f, &pe); err == nil {
			s.finish(fmt.Errorf("%s: %w", s.what, pe.Err()))
		}
	default:
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "unexpected %s frame on a copy stream", f.Type)
	}
	if err != nil {
		s.c.violation(fmt.Errorf("%s: %w", s.what, err))
	}
}

func (s *copyStream) fail(err error) { s.finish(fmt.Errorf("%s: %w", s.what, err)) }

// run does the copy's local half (work) while the stream lasts. A local
// failure or ctx ends the stream: the agent is told to stop and remove its
// partial copy.
func (s *copyStream) run(ctx context.Context, work func() error) error {
	werr := make(chan error, 1)
	go func() { werr <- work() }()
	select {
	case err := <-werr:
		if err != nil {
			return s.abandon(fmt.Errorf("%s: %w", s.what, err))
		}
		return s.wait(ctx)
	case <-ctx.Done():
		err := s.abandon(errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", s.what, ctx.Err()))
		<-werr // its window is closed: it stops
		return err
	}
}

// wait waits for the box to end the stream (its error, or nil), or for
// ctx (the stream is abandoned: ErrTimeout).
func (s *copyStream) wait(ctx context.Context) error {
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return s.abandon(errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", s.what, ctx.Err()))
	}
}

// abandon ends a stream that has not ended. A stream that ended with an
// error keeps that one (what made the local half fail); one the box ended
// cleanly, even while this ran, still fails with err: the local half did.
func (s *copyStream) abandon(err error) error {
	select {
	case <-s.done:
	default:
		_ = s.c.send(protocol.TCancel, s.id, nil)
		s.c.forget(s.id)
		s.finish(err)
	}
	if s.err != nil {
		return s.err
	}
	return err
}

// copyWriter sends a copy in's stream within the window.
type copyWriter struct{ s *copyStream }

func (w copyWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := w.s.send.take(min(len(p)-done, protocol.MaxChunk))
		if err != nil {
			return done, err
		}
		if err := w.s.c.sendFrame(protocol.Frame{Type: protocol.TStdin, Stream: w.s.id, Payload: p[done : done+n]}); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}
