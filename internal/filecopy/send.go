package filecopy

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// SendOptions say what Send archives.
type SendOptions struct {
	// Name is the source's name in the stream. Empty: the source is a
	// directory whose contents are sent (names relative to it).
	Name string
	Limits
	// Progress, if set, is called as data is sent.
	Progress func(Stats)
	// Direct reads large regular files with O_DIRECT (a copy out of a
	// box: its uncached buffered reads are slow under TCG), falling back
	// to buffered reads where the file system refuses it.
	Direct bool
}

// Send writes name in dir (not followed if it is a symlink) as a tar
// stream to w: directories with everything below them, regular files,
// symlinks as symlinks, a file's further hard links as links. Device nodes,
// FIFOs and sockets are skipped. Owners are not sent. The caps of
// opt.Limits are ErrLimit naming the path.
func Send(w io.Writer, dir *os.File, name string, opt SendOptions) (Stats, error) {
	s := &sender{tw: tar.NewWriter(w), opt: opt, links: map[devIno]string{}}
	if opt.Direct {
		s.buf = AlignedBuffer(directBuf, directAlign)
	} else {
		s.buf = make([]byte, copyBuf)
	}
	var err error
	if opt.Name == "" {
		err = s.contents(int(dir.Fd()), name)
	} else {
		err = s.entry(int(dir.Fd()), name, opt.Name, 0)
	}
	if err == nil {
		err = s.tw.Close()
	}
	return s.st, err
}

type sender struct {
	tw    *tar.Writer
	opt   SendOptions
	st    Stats
	links map[devIno]string // first name of each file with more links
	buf   []byte
	sent  int64
}

func (s *sender) contents(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open directory", name, err)
	}
	return s.children(fd, "", 0)
}

// children sends the entries of the directory fd (which it closes) under arc.
func (s *sender) children(fd int, arc string, depth int) error {
	d := os.NewFile(uintptr(fd), arc)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return pathErr("read directory", arc, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.entry(fd, n, path.Join(arc, n), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *sender) count(arc string, size int64) error {
	if m := s.opt.MaxEntries; m > 0 && s.st.Entries+1 > m {
		return errdefs.Errorf(errdefs.ErrLimit, "more than %d entries (at %q)", m, arc)
	}
	if m := s.opt.MaxBytes; m > 0 && s.st.Bytes+size > m {
		return errdefs.Errorf(errdefs.ErrLimit, "more than %d bytes of file data (%q has %d)", m, arc, size)
	}
	s.st.Entries++
	s.st.Bytes += size
	return nil
}

func (s *sender) entry(dirfd int, name, arc string, depth int) error {
	if depth > MaxDepth {
		return errdefs.Errorf(errdefs.ErrLimit, "%q is deeper than %d directories", arc, MaxDepth)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT && depth > 0 {
			return nil // removed while we walked
		}
		return pathErr("stat", arc, err)
	}
	// PAX keeps sub-second mtimes (other formats round them).
	h := &tar.Header{Name: arc, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := s.count(arc, 0); err != nil {
			return err
		}
		h.Typeflag, h.Name = tar.TypeDir, arc+"/"
		if err := s.tw.WriteHeader(h); err != nil {
			return err
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return pathErr("open directory", arc, err)
		}
		return s.children(fd, arc, depth)
	case unix.S_IFLNK:
		if err := s.count(arc, 0); err != nil {
			return err
		}
		target, err := readlinkat(dirfd, name)
		if err != nil {
			return pathErr("readlink", arc, err)
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
		return s.tw.WriteHeader(h)
	case unix.S_IFREG:
		return s.file(dirfd, name, arc, h)
	}
	s.st.Skipped++
	return nil
}

func (s *sender) file(dirfd int, name, arc string, h *tar.Header) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open", arc, err)
	}
	f := os.NewFile(uintptr(fd), arc)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("stat", arc, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%q changed while being copied", arc)
	}
	if st.Nlink > 1 {
		key := devIno{uint64(st.Dev), st.Ino}
		if first, ok := s.links[key]; ok {
			if err := s.count(arc, 0); err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeLink, first
			return s.tw.WriteHeader(h)
		}
		if int64(len(s.links)) < 1<<20 {
			s.links[key] = arc
		}
	}
	if err := s.count(arc, st.Size); err != nil {
		return err
	}
	h.Typeflag, h.Size, h.Mode = tar.TypeReg, st.Size, int64(st.Mode&0o7777)
	h.ModTime = time.Unix(st.Mtim.Unix())
	if err := s.tw.WriteHeader(h); err != nil {
		return err
	}
	left := st.Size
	// O_DIRECT reads whole buffers (the file's end comes short); what a
	// file that grew has past its size is not sent.
	direct := s.opt.Direct && st.Size >= directMin && setDirect(f) == nil
	for left > 0 {
		p := s.buf[:min(int64(len(s.buf)), left)]
		if direct {
			p = s.buf
		}
		n, rerr := f.Read(p)
		if direct && n == 0 && errors.Is(rerr, unix.EINVAL) {
			if err := dropDirect(f); err != nil {
				return pathErr("read", arc, err)
			}
			direct = false
			continue
		}
		n = int(min(int64(n), left))
		if n > 0 {
			if _, err := s.tw.Write(s.buf[:n]); err != nil {
				return err
			}
			left -= int64(n)
			s.sent += int64(n)
			if s.opt.Progress != nil {
				s.opt.Progress(Stats{Entries: s.st.Entries, Bytes: s.sent})
			}
		}
		if rerr == io.EOF || (rerr == nil && n == 0) {
			break
		}
		if rerr != nil {
			return pathErr("read", arc, rerr)
		}
	}
	if left > 0 {
		// The file shrank while we read it: the stream still needs its size.
		clear(s.buf)
		for left > 0 {
			n := min(int64(len(s.buf)), left)
			if _, err := s.tw.Write(s.buf[:n]); err != nil {
				return err
			}
			left -= n
		}
	}
	return nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; size <= MaxName*2; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
	return "", errors.New("symlink target too long")
}
