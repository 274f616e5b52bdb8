package filecopy

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"

	"github.com/boxlite/boxlite/internal/abi"
)

// Caps on what one entry of a stream may claim.
const (
	MaxName      = 4096 // bytes in an entry name or link target (PATH_MAX)
	MaxDepth     = 256  // components in an entry name: one open fd each while walking
	maxComponent = 255  // bytes in one component (NAME_MAX)
)

// Limits cap one copy; a zero field means no cap.
type Limits struct {
	MaxBytes   int64 // file data
	MaxEntries int64
}

// CopyLimits are a copy's caps from its options' MaxBytes and MaxEntries
// (BoxLite's CopyOptions, the C ABI's copy options): negative is none, 0 the
// default, which caps a copy out of a box (out) and nothing else.
func CopyLimits(maxBytes, maxEntries int64, out bool) Limits {
	pick := func(v, def int64) int64 {
		switch {
		case v < 0:
			return 0
		case v == 0 && out:
			return def
		}
		return v
	}
	return Limits{MaxBytes: pick(maxBytes, abi.DefaultCopyOutMaxBytes), MaxEntries: pick(maxEntries, abi.DefaultCopyOutMaxEntries)}
}

// Stats count what a copy moved.
type Stats struct {
	Entries int64
	Bytes   int64 // file data
	Skipped int64 // device nodes, FIFOs and sockets, not copied
}

// ExtractOptions say what a stream may hold and how its entries land.
type ExtractOptions struct {
	// Base, when set, is the one top-level name the stream may hold: every
	// entry is Base or under it. Empty: a directory's contents (any
	// relative name; a "." entry is the directory itself and skipped).
	Base string
	Limits
	// KeepSetID keeps set-uid and set-gid bits (a copy into a box, as
	// docker cp does); otherwise they are dropped.
	KeepSetID bool
	// Umask clears these permission bits from every mode the stream gives
	// (a copy out: the caller's, see Umask), as the kernel's umask would
	// for files it creates.
	Umask uint32
	// Progress, if set, is called as data lands.
	Progress func(Stats)
	// Direct writes large regular files with O_DIRECT (a copy into a box:
	// its buffered writes are slow under TCG, direct ones DMA), falling
	// back to buffered writes where the file system refuses it.
	Direct bool
}

const (
	copyBuf = 256 << 10
	// directBuf is the buffer of a Direct extract; a file of at least
	// directMin bytes is written with O_DIRECT, in blocks of directAlign.
	directBuf   = 1 << 20
	directMin   = 1 << 20
	directAlign = 4096
)

// Extract writes the tar stream r under root, a directory the caller
// trusts. Nothing below root is trusted: each name is walked one component
// at a time without following a symlink or other non-directory, whether it
// was there before or came in the stream; names must be relative and free
// of "..", link targets of hard links must be regular files this stream
// created, device nodes and FIFOs are skipped, owners are not kept. A
// refused stream is ErrInvalidArgument, a cap ErrLimit, each naming the
// entry.
func Extract(r io.Reader, root *os.File, opt ExtractOptions) (Stats, error) {
	x := &extractor{root: int(root.Fd()), opt: opt, made: map[devIno]bool{}}
	if opt.Direct {
		x.buf = AlignedBuffer(directBuf, directAlign)
	} else {
		x.buf = make([]byte, copyBuf)
	}
	defer x.closeChain()
	err := x.run(tar.NewReader(r))
	x.finishDirs()
	return x.st, err
}

type devIno struct{ dev, ino uint64 }

type dirAttr struct {
	parts []string
	mode  uint32
	mtime time.Time
}

type extractor struct {
	root  int
	opt   ExtractOptions
	st    Stats
	chain []link // open fds of the last parent walked
	made  map[devIno]bool
	dirs  []dirAttr
	buf   []byte
	// written is the file data landed so far; st.Bytes counts what the
	// headers claimed, for the cap.
	written int64
}

type link struct {
	name string
	fd   int
}

func refuse(format string, args ...any) error {
	return errdefs.Errorf(errdefs.ErrInvalidArgument, format, args...)
}

func (x *extractor) run(tr *tar.Reader) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return streamErr(err)
		}
		if err := x.entry(tr, h); err != nil {
			return err
		}
	}
}

// streamErr keeps an error that came with the stream (the sender's own
// failure) and calls anything else from archive/tar a malformed stream.
func streamErr(err error) error {
	if errdefs.KindOf(err) != errdefs.KindInternal {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return refuse("the stream ends in the middle of an entry")
	}
	return refuse("malformed stream: %v", err)
}

// parts validates an entry name and splits it; nil means the "." of a
// contents copy.
func (x *extractor) parts(name, what string) ([]string, error) {
	n := name
	for strings.HasPrefix(n, "./") {
		n = n[2:]
	}
	n = strings.TrimRight(n, "/")
	short := name
	if len(short) > 200 {
		short = short[:200] + "..."
	}
	switch {
	case n == "" || n == ".":
		if x.opt.Base == "" {
			return nil, nil
		}
		return nil, refuse("unexpected %s %q in the stream", what, short)
	case len(n) > MaxName:
		return nil, errdefs.Errorf(errdefs.ErrLimit, "%s longer than %d bytes: %q", what, MaxName, short)
	case strings.HasPrefix(n, "/"):
		return nil, refuse("absolute %s %q in the stream", what, short)
	case strings.ContainsRune(n, 0):
		return nil, refuse("%s with a NUL byte: %q", what, short)
	}
	ps := strings.Split(n, "/")
	if len(ps) > MaxDepth {
		return nil, errdefs.Errorf(errdefs.ErrLimit, "%s deeper than %d directories: %q", what, MaxDepth, short)
	}
	for _, p := range ps {
		if p == "" || p == "." || p == ".." {
			return nil, refuse("unsafe %s %q in the stream", what, short)
		}
		if len(p) > maxComponent {
			return nil, errdefs.Errorf(errdefs.ErrLimit, "%s component longer than %d bytes: %q", what, maxComponent, short)
		}
	}
	if x.opt.Base != "" && ps[0] != x.opt.Base {
		return nil, refuse("unexpected %s %q in the stream (not under %q)", what, short, x.opt.Base)
	}
	return ps, nil
}

func (x *extractor) count(name string, size int64) error {
	if size < 0 {
		return refuse("negative size for %q", name)
	}
	if m := x.opt.MaxEntries; m > 0 && x.st.Entries+x.st.Skipped+1 > m {
		return errdefs.Errorf(errdefs.ErrLimit, "more than %d entries (at %q)", m, name)
	}
	if m := x.opt.MaxBytes; m > 0 && x.st.Bytes+size > m {
		return errdefs.Errorf(errdefs.ErrLimit, "more than %d bytes of file data (%q claims %d)", m, name, size)
	}
	return nil
}

func (x *extractor) entry(tr *tar.Reader, h *tar.Header) error {
	size := int64(0)
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		size = h.Size
	case tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if err := x.count(h.Name, 0); err != nil {
			return err
		}
		if _, err := x.parts(h.Name, "path"); err != nil {
			return err
		}
		x.st.Skipped++
		return nil
	default:
		return refuse("entry %q of type %q is not supported", h.Name, h.Typeflag)
	}
	if err := x.count(h.Name, size); err != nil {
		return err
	}
	ps, err := x.parts(h.Name, "path")
	if err != nil || ps == nil {
		return err
	}
	if err := x.make(tr, h, ps); err != nil {
		return err
	}
	// Counted once made, so that a failure reports what it left.
	x.st.Entries++
	x.st.Bytes += size
	return nil
}

func (x *extractor) make(tr *tar.Reader, h *tar.Header, ps []string) error {
	parent, err := x.dir(ps[:len(ps)-1], true)
	if err != nil {
		return err
	}
	name := ps[len(ps)-1]
	mtime := h.ModTime
	switch h.Typeflag {
	case tar.TypeDir:
		kept, err := x.clear(parent, name, true)
		if err != nil {
			return err
		}
		if !kept {
			if err := unix.Mkdirat(parent, name, 0o700); err != nil {
				return pathErr("mkdir", h.Name, err)
			}
		}
		x.dirs = append(x.dirs, dirAttr{ps, uint32(h.Mode) & 0o7777, mtime})
		return nil
	case tar.TypeSymlink:
		if len(h.Linkname) >= MaxName || h.Linkname == "" || strings.ContainsRune(h.Linkname, 0) {
			return refuse("bad symlink target for %q", h.Name)
		}
		if _, err := x.clear(parent, name, false); err != nil {
			return err
		}
		if err := unix.Symlinkat(h.Linkname, parent, name); err != nil {
			return pathErr("symlink", h.Name, err)
		}
		setTimes(parent, name, mtime, unix.AT_SYMLINK_NOFOLLOW)
		return nil
	case tar.TypeLink:
		return x.hardLink(h, ps, parent, name)
	}
	if _, err := x.clear(parent, name, false); err != nil {
		return err
	}
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	direct := x.opt.Direct && h.Size >= directMin
	if direct {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Openat(parent, name, flags, 0o600)
	if direct && err == unix.EINVAL { // the file system has no O_DIRECT
		direct = false
		fd, err = unix.Openat(parent, name, flags&^unix.O_DIRECT, 0o600)
	}
	if err != nil {
		return pathErr("create", h.Name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := x.copyData(f, tr, h.Name, direct); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, x.mode(h.Mode)); err != nil {
		return pathErr("chmod", h.Name, err)
	}
	setTimes(fd, "", mtime, 0)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("stat", h.Name, err)
	}
	x.made[devIno{st.Dev, st.Ino}] = true
	return nil
}

// copyData moves one file's data with a large buffer (os.File's ReadFrom
// would use 32 KiB chunks), reporting progress per chunk. With direct, f
// is O_DIRECT: every chunk but the last is whole blocks at block offsets,
// and the last one's partial block is written after O_DIRECT is dropped.
func (x *extractor) copyData(f *os.File, r io.Reader, name string, direct bool) error {
	for {
		n, rerr := io.ReadFull(r, x.buf)
		if n > 0 {
			p := x.buf[:n]
			if direct {
				whole := n &^ (directAlign - 1)
				if whole > 0 {
					err := writeAll(f, p[:whole])
					if err == nil {
						p = p[whole:]
					} else if err != unix.EINVAL {
						return pathErr("write", name, err)
					} // else: refused, all of p is written buffered
				}
				if len(p) > 0 {
					if err := dropDirect(f); err != nil {
						return pathErr("write", name, err)
					}
					direct = false
				}
			}
			if err := writeAll(f, p); err != nil {
				return pathErr("write", name, err)
			}
			x.written += int64(n)
			if x.opt.Progress != nil {
				x.opt.Progress(Stats{Entries: x.st.Entries, Bytes: x.written})
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil // tar.Reader reports a short entry at the next Next
		}
		if rerr != nil {
			return streamErr(rerr)
		}
	}
}

func writeAll(f *os.File, p []byte) error {
	_, err := f.Write(p)
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// dropDirect makes f's later I/O buffered, setDirect O_DIRECT.
func dropDirect(f *os.File) error { return fileFlags(f, 0, unix.O_DIRECT) }
func setDirect(f *os.File) error  { return fileFlags(f, unix.O_DIRECT, 0) }

func fileFlags(f *os.File, set, unset int) error {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unset|set)
	}
	return err
}

// AlignedBuffer returns n bytes whose start is a multiple of align (a
// power of two), for O_DIRECT I/O. Go's heap does not move objects.
func AlignedBuffer(n, align int) []byte {
	b := make([]byte, n+align)
	off := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1))
	if off != 0 {
		off = align - off
	}
	return b[off : off+n : off+n]
}

func (x *extractor) mode(m int64) uint32 {
	keep := uint32(0o1777)
	if x.opt.KeepSetID {
		keep = 0o7777
	}
	return uint32(m) & keep &^ (x.opt.Umask & 0o777)
}

func setTimes(dirfd int, name string, t time.Time, flags int) {
	if t.IsZero() || t.Unix() < 0 {
		return
	}
	ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	if name == "" {
		_ = unix.UtimesNanoAt(dirfd, "", ts, unix.AT_EMPTY_PATH) // best effort, as tar does
		return
	}
	_ = unix.UtimesNanoAt(dirfd, name, ts, flags)
}

func pathErr(op, name string, err error) error {
	kind := errdefs.ErrInternal
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.EMFILE):
		kind = errdefs.ErrLimit
	case errors.Is(err, unix.ENOENT):
		kind = errdefs.ErrNotFound
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS),
		errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EEXIST):
		kind = errdefs.ErrInvalidArgument
	}
	return errdefs.Errorf(kind, "%s %q: %v", op, name, err)
}

func (x *extractor) closeChain() {
	for _, l := range x.chain {
		unix.Close(l.fd)
	}
	x.chain = nil
}

// dir returns an fd of the directory parts under root, walked without
// following symlinks and made when missing with create. The chain owns it.
func (x *extractor) dir(parts []string, create bool) (int, error) {
	keep := 0
	for keep < len(x.chain) && keep < len(parts) && x.chain[keep].name == parts[keep] {
		keep++
	}
	for _, l := range x.chain[keep:] {
		unix.Close(l.fd)
	}
	x.chain = x.chain[:keep]
	for i := keep; i < len(parts); i++ {
		cur := x.root
		if len(x.chain) > 0 {
			cur = x.chain[len(x.chain)-1].fd
		}
		fd, err := openDirAt(cur, parts[i], create)
		if err != nil {
			p := strings.Join(parts[:i+1], "/")
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, refuse("the stream writes through a symlink or other non-directory: %q", p)
			}
			return -1, pathErr("open directory", p, err)
		}
		x.chain = append(x.chain, link{parts[i], fd})
	}
	if len(x.chain) == 0 {
		return x.root, nil
	}
	return x.chain[len(x.chain)-1].fd, nil
}

func openDirAt(dirfd int, name string, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == unix.ENOENT && create {
		// An implicit parent: the umask applies, as for mkdir -p.
		if err = unix.Mkdirat(dirfd, name, 0o777); err == nil || err == unix.EEXIST {
			fd, err = unix.Openat(dirfd, name, flags, 0)
		}
	}
	return fd, err
}

// clear makes room for a new entry name in dirfd; it reports whether a
// directory is there and kept (keepDir).
func (x *extractor) clear(dirfd int, name string, keepDir bool) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, pathErr("stat", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if keepDir {
			return true, nil
		}
		return false, RemoveAt(dirfd, name)
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return false, pathErr("remove", name, err)
	}
	return false, nil
}

// hardLink links name to a regular file this stream created, never to
// anything that was there before.
func (x *extractor) hardLink(h *tar.Header, ps []string, parent int, name string) error {
	src, err := x.parts(h.Linkname, "hard link target")
	if err != nil {
		return err
	}
	bad := refuse("hard link to a file that is not in the stream: %q -> %q", h.Name, h.Linkname)
	if src == nil {
		return bad
	}
	// The target's directory, walked apart from the chain that holds parent.
	sdir, closeSdir := x.root, func() {}
	if len(src) > 1 {
		cur := x.root
		var opened []int
		closeSdir = func() {
			for _, fd := range opened {
				unix.Close(fd)
			}
		}
		for _, c := range src[:len(src)-1] {
			fd, err := openDirAt(cur, c, false)
			if err != nil {
				closeSdir()
				return bad
			}
			opened = append(opened, fd)
			cur = fd
		}
		sdir = cur
	}
	defer closeSdir()
	sname := src[len(src)-1]
	var st unix.Stat_t
	if err := unix.Fstatat(sdir, sname, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG || !x.made[devIno{st.Dev, st.Ino}] {
		return bad
	}
	if len(src) == len(ps) && strings.Join(src, "/") == strings.Join(ps, "/") {
		return nil // a link to itself
	}
	if _, err := x.clear(parent, name, false); err != nil {
		return err
	}
	if err := unix.Linkat(sdir, sname, parent, name, 0); err != nil {
		return pathErr("link", h.Name, err)
	}
	return nil
}

// finishDirs sets directory modes and times, deepest first, once their
// contents are in (a read-only directory could not be filled).
func (x *extractor) finishDirs() {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		fd, err := x.dir(d.parts, false)
		if err != nil {
			continue // replaced by a later entry
		}
		_ = unix.Fchmod(fd, x.mode(int64(d.mode)))
		setTimes(fd, "", d.mtime, 0)
	}
	x.dirs = nil
}

// RemoveAt removes name in dirfd with everything under it; symlinks are
// removed, never followed.
func RemoveAt(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return pathErr("stat", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && err != unix.ENOENT {
			return pathErr("remove", name, err)
		}
		return nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open directory", name, err)
	}
	_ = unix.Fchmod(fd, 0o700) // a read-only directory can still be emptied
	d := os.NewFile(uintptr(fd), name)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = RemoveAt(fd, n); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return pathErr("remove", name, err)
	}
	return nil
}
