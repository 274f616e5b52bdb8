package filecopy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// Dirs opens directories the way one side of a copy resolves its own paths:
// the host as the caller names them, the guest inside the box's root.
type Dirs interface {
	// OpenDir opens the directory p; with create, missing directories are
	// made first (mkdir -p). Errors keep their errno (ENOENT, ENOTDIR).
	OpenDir(p string, create bool) (*os.File, error)
}

// Host resolves paths as the calling process does, symlinks followed.
func Host() Dirs { return hostDirs{} }

type hostDirs struct{}

func (hostDirs) OpenDir(p string, create bool) (*os.File, error) {
	if create {
		if err := os.MkdirAll(p, 0o777); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// HostNoSymlinks resolves paths as the calling process does, but through
// no symlink, whoever made it: the destination of a copy out, where an
// earlier copy out of a box may have left one (a box's symlink copied as a
// link) to steer the next copy anywhere the caller can write. A symlink in
// the path is a *SymlinkError naming it; directories made with create are
// made one by one without following one.
func HostNoSymlinks() Dirs { return noSymlinkDirs{} }

// SymlinkError is a destination path that goes through a symlink. It is an
// errdefs.ErrInvalidArgument.
type SymlinkError struct {
	Dest string // the path asked for
	Link string // the symlink in it (Dest or one of its parents)
}

func (e *SymlinkError) Error() string {
	return fmt.Sprintf("destination %s: %s is a symlink, and a copy out writes through no symlink (name the directory it points to)", e.Dest, e.Link)
}

func (e *SymlinkError) Unwrap() error { return errdefs.ErrInvalidArgument }

type noSymlinkDirs struct{}

func (noSymlinkDirs) OpenDir(p string, create bool) (*os.File, error) {
	d, err := openNoSymlinks(unix.AT_FDCWD, p)
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return d, symlinkErr(p, err)
	}
	// mkdir -p, one component at a time, none followed.
	start := "."
	if path.IsAbs(p) {
		start = "/"
	}
	cur, err := openNoSymlinks(unix.AT_FDCWD, start)
	if err != nil {
		return nil, err
	}
	prefix := start
	for _, c := range strings.Split(strings.Trim(path.Clean(p), "/"), "/") {
		if c == "." || c == "" {
			continue
		}
		prefix = path.Join(prefix, c)
		next, err := openDirAt(int(cur.Fd()), c, true)
		cur.Close()
		if err != nil {
			return nil, symlinkErr(p, &os.PathError{Op: "open", Path: prefix, Err: err})
		}
		cur = os.NewFile(uintptr(next), prefix)
	}
	return cur, nil
}

// openNoSymlinks opens the directory p (relative to dirfd) through no
// symlink (openat2 RESOLVE_NO_SYMLINKS: ELOOP if one is in the way).
func openNoSymlinks(dirfd int, p string) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(dirfd, p, &how)
		if err == unix.EAGAIN || err == unix.EINTR { // a rename raced the lookup
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return os.NewFile(uintptr(fd), p), nil
	}
}

// symlinkErr turns the ELOOP of a lookup through no symlink into a
// *SymlinkError naming the first symlink of p.
func symlinkErr(p string, err error) error {
	if !errors.Is(err, unix.ELOOP) {
		return err
	}
	link := p
	prefix := ""
	if path.IsAbs(p) {
		prefix = "/"
	}
	for _, c := range strings.Split(strings.Trim(path.Clean(p), "/"), "/") {
		prefix = path.Join(prefix, c)
		if fi, lerr := os.Lstat(prefix); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			link = prefix
			break
		}
	}
	return &SymlinkError{Dest: p, Link: link}
}

// InRoot resolves paths inside root as a process chrooted there would:
// absolute symlinks and ".." never leave it (openat2 RESOLVE_IN_ROOT).
func InRoot(root *os.File) Dirs { return rootDirs{root} }

type rootDirs struct{ root *os.File }

const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

func (r rootDirs) open(p string) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: inRoot}
	for {
		fd, err := unix.Openat2(int(r.root.Fd()), p, &how)
		if err == unix.EAGAIN || err == unix.EINTR { // a rename raced the lookup
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return os.NewFile(uintptr(fd), p), nil
	}
}

func (r rootDirs) OpenDir(p string, create bool) (*os.File, error) {
	p = path.Clean("/" + p)
	d, err := r.open(p)
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return d, err
	}
	// mkdir -p, each prefix resolved from the root again, so that a
	// symlink in it resolves as in the box.
	cur, err := r.open("/")
	if err != nil {
		return nil, err
	}
	prefix := "/"
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		prefix = path.Join(prefix, c)
		next, err := r.open(prefix)
		if errors.Is(err, unix.ENOENT) {
			if e := unix.Mkdirat(int(cur.Fd()), c, 0o755); e != nil && e != unix.EEXIST {
				cur.Close()
				return nil, &os.PathError{Op: "mkdir", Path: prefix, Err: e}
			}
			next, err = r.open(prefix)
		}
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

const maxLinks = 40

// OpenSource splits the source path p into its directory, opened, and its
// name there ("." for a root). With follow, a symlink named by p is
// followed (as docker cp -L), resolved as d resolves paths.
func OpenSource(d Dirs, p string, follow bool) (*os.File, string, error) {
	for i := 0; ; i++ {
		clean := path.Clean(p)
		dir, name := path.Split(clean)
		if clean == "/" || clean == "." {
			dir, name = clean, "."
		}
		if dir == "" {
			dir = "."
		}
		parent, err := d.OpenDir(dir, false)
		if err != nil {
			return nil, "", srcErr(p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			parent.Close()
			return nil, "", srcErr(p, err)
		}
		if !follow || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return parent, name, nil
		}
		target, err := readlinkat(int(parent.Fd()), name)
		parent.Close()
		if err != nil {
			return nil, "", srcErr(p, err)
		}
		if i == maxLinks {
			return nil, "", srcErr(p, unix.ELOOP)
		}
		if !path.IsAbs(target) {
			target = path.Join(dir, target)
		}
		p = target
	}
}

func srcErr(p string, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return errdefs.Errorf(errdefs.ErrNotFound, "%s: no such file or directory", p)
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v", p, err)
}

// IsDir reports whether p is a directory, as d resolves it.
func IsDir(d Dirs, p string) bool {
	f, err := d.OpenDir(path.Clean(p), false)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// FirstIsDir peeks at the tar archive in r and reports whether its first
// entry is a directory, consuming nothing; an archive it cannot read says
// no (its extraction then reports what is wrong with it). BoxLite's layout
// places a directory copied out inside a destination that is not one yet,
// and a file as that destination: the archive's first entry says which.
func FirstIsDir(r *bufio.Reader) bool {
	// A header, and room for the PAX header (and its records) before it: an
	// archive of one entry is longer (two end blocks follow), so this waits
	// for no more than the first entry's headers.
	b, _ := r.Peek(4 * 512)
	h, err := tar.NewReader(bytes.NewReader(b)).Next()
	return err == nil && h.Typeflag == tar.TypeDir
}

// Place is where a copy lands, by docker cp's rules.
type Place struct {
	// Base is the source's name ("" for a directory's contents).
	Base      string
	Overwrite bool
}

// Target is a prepared destination: Extract fills it, Commit puts it in
// place, Discard removes what a failed copy left.
type Target struct {
	Path  string // the copy's final path, for messages
	merge bool   // writing into an existing directory, in place
	root  *os.File
	// A new path: the copy is made in tmp (in parent) and renamed to name.
	parent *os.File
	tmp    string
	name   string
	base   string // what the stream holds at its top ("" for contents)
	// made: the directories Prepare made for a destination ending in "/",
	// deepest first, removed again (when still empty) if the copy fails.
	made []string
}

// Prepare settles where a copy to dest lands before any data comes, by
// docker cp's rules: an existing directory receives the source under its
// own name (or, for contents, the source's entries); otherwise dest is the
// copy's new name, its parent made as needed (so is dest itself when it ends
// in "/"). A copy to a new name or over a non-directory is made beside it
// and renamed into place when complete, so a failed copy leaves nothing; a
// copy merged into an existing directory writes in place.
func Prepare(d Dirs, dest string, p Place) (*Target, error) {
	if dest == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "empty destination")
	}
	clean := path.Clean(dest)
	var made []string
	if strings.HasSuffix(dest, "/") {
		made = missingDirs(clean)
	}
	dir, err := d.OpenDir(clean, strings.HasSuffix(dest, "/"))
	t := &Target{Path: clean, base: p.Base, made: made}
	if err == nil {
		if p.Base == "" {
			t.merge, t.root = true, dir
			return t, nil
		}
		t.Path = path.Join(clean, p.Base)
		var st unix.Stat_t
		if e := unix.Fstatat(int(dir.Fd()), p.Base, &st, unix.AT_SYMLINK_NOFOLLOW); e == nil {
			if !p.Overwrite {
				dir.Close()
				return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "%s already exists", t.Path)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				t.merge, t.root = true, dir
				return t, nil
			}
		}
		t.parent, t.name = dir, p.Base
	} else {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) || strings.HasSuffix(dest, "/") {
			return nil, destErr(dest, err)
		}
		pdir, name := path.Split(clean)
		if pdir == "" {
			pdir = "."
		}
		if name == "" || name == "." || name == ".." {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "destination %q names no file", dest)
		}
		if t.parent, err = d.OpenDir(pdir, true); err != nil {
			return nil, destErr(dest, err)
		}
		t.name = name
		var st unix.Stat_t
		if e := unix.Fstatat(int(t.parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); e == nil {
			if !p.Overwrite {
				t.parent.Close()
				return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "%s already exists", clean)
			}
			if p.Base == "" && st.Mode&unix.S_IFMT != unix.S_IFLNK {
				t.parent.Close()
				return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s exists and is not a directory", clean)
			}
		}
	}
	if err := t.makeTmp(); err != nil {
		t.parent.Close()
		return nil, err
	}
	return t, nil
}

// missingDirs lists p and its parents that do not exist, deepest first.
func missingDirs(p string) []string {
	var out []string
	for q := p; q != "/" && q != "." && q != ""; q = path.Dir(q) {
		var st unix.Stat_t
		if unix.Lstat(q, &st) == nil {
			break
		}
		out = append(out, q)
	}
	return out
}

func destErr(dest string, err error) error {
	var se *SymlinkError
	if errors.As(err, &se) {
		return err // names dest already
	}
	if errors.Is(err, unix.ENOTDIR) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "destination %s: a parent is not a directory", dest)
	}
	if errors.Is(err, unix.ENOENT) {
		return errdefs.Errorf(errdefs.ErrNotFound, "destination %s: no such directory", dest)
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "destination %s: %v", dest, err)
}

// TmpPrefix begins the name of the directory a copy is made in beside its
// destination before it is renamed into place.
const TmpPrefix = ".boxlite-copy-"

func (t *Target) makeTmp() error {
	var b [8]byte
	for range 10 {
		_, _ = rand.Read(b[:])
		name := TmpPrefix + hex.EncodeToString(b[:])
		err := unix.Mkdirat(int(t.parent.Fd()), name, 0o700)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return pathErr("mkdir", path.Join(path.Dir(t.Path), name), err)
		}
		t.tmp = name
		fd, err := openDirAt(int(t.parent.Fd()), name, false)
		if err != nil {
			return pathErr("open", name, err)
		}
		if t.base == "" { // a directory's contents become a new directory
			if err := unix.Mkdirat(fd, "d", 0o777); err == nil {
				var dfd int
				if dfd, err = openDirAt(fd, "d", false); err == nil {
					unix.Close(fd)
					fd = dfd
				}
			}
			if err != nil {
				unix.Close(fd)
				return pathErr("mkdir", name, err)
			}
		}
		t.root = os.NewFile(uintptr(fd), name)
		return nil
	}
	return errdefs.Errorf(errdefs.ErrInternal, "no temporary name free beside %s", t.Path)
}

// Extract writes the stream r into the target (opt.Base is set from the
// target's Place).
func (t *Target) Extract(r io.Reader, opt ExtractOptions) (Stats, error) {
	opt.Base = t.base
	return Extract(r, t.root, opt)
}

// Merged reports whether the copy writes into an existing directory in
// place (so a failure leaves what was written).
func (t *Target) Merged() bool { return t.merge }

// Commit puts a copy made beside its destination in place.
func (t *Target) Commit() error {
	if t.merge {
		t.close()
		return nil
	}
	tmpfd, err := openDirAt(int(t.parent.Fd()), t.tmp, false)
	if err != nil {
		return pathErr("open", t.tmp, err)
	}
	defer unix.Close(tmpfd)
	src := t.base
	if src == "" {
		src = "d"
	}
	var got, have unix.Stat_t
	if err := unix.Fstatat(tmpfd, src, &got, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errdefs.Errorf(errdefs.ErrNotFound, "the source sent no %q", t.base)
	}
	pfd := int(t.parent.Fd())
	if unix.Fstatat(pfd, t.name, &have, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		(have.Mode&unix.S_IFMT == unix.S_IFDIR || got.Mode&unix.S_IFMT == unix.S_IFDIR) {
		// rename(2) replaces only a non-directory with a non-directory.
		if err := RemoveAt(pfd, t.name); err != nil {
			return err
		}
	}
	if err := unix.Renameat(tmpfd, src, pfd, t.name); err != nil {
		return pathErr("rename", t.Path, err)
	}
	t.Discard()
	return nil
}

// Discard removes a copy made beside its destination and releases the
// target; a merged copy's entries stay.
func (t *Target) Discard() {
	if t.tmp != "" && t.parent != nil {
		_ = RemoveAt(int(t.parent.Fd()), t.tmp)
		t.tmp = ""
	}
	t.close()
}

func (t *Target) close() {
	if t.root != nil {
		t.root.Close()
		t.root = nil
	}
	if t.parent != nil {
		t.parent.Close()
		t.parent = nil
	}
}

// Finish ends a copy whose extraction returned err after moving st:
// Commit when it succeeded, else Discard, the error then saying what a
// merge into an existing directory left in place.
func (t *Target) Finish(st Stats, err error) error {
	if err == nil {
		err = t.Commit()
	}
	if err != nil {
		if t.Merged() && st.Entries > 0 {
			err = fmt.Errorf("%w (%d entries, %d bytes were merged into %s before the copy stopped; they are left in place)", err, st.Entries, st.Bytes, t.Path)
		}
		t.Discard()
		for _, d := range t.made {
			if unix.Rmdir(d) != nil { // not empty (or not ours any more): leave it and its parents
				break
			}
		}
	}
	return err
}
