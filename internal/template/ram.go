package template

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/hv"
	"github.com/boxlite/boxlite/internal/sparse"
)

// RAM returns the template's memory as a sealed memfd, for an hv.RAM that
// is not Shared. When a living process (a shim of another box of the
// template) holds one, it is that memfd, opened through that process's
// /proc/PID/fd, so the boxes map the same pages; otherwise it is a new copy
// of the saved memory, which this process then offers the same way until
// release. The caller keeps the file open while it may be offered.
func (t *Template) RAM() (f *os.File, release func(), err error) {
	dir := filepath.Join(t.Dir, holderDir)
	if f := t.sharedRAM(dir); f != nil {
		return f, func() { f.Close() }, nil
	}
	if f, err = hv.NewRAM("boxlite-template", t.MemoryMiB); err != nil {
		return nil, nil, err
	}
	if err := t.loadRAM(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	entry, err := offer(dir, f)
	if err != nil {
		// Boxes will not share this copy's pages; it works all the same.
		entry = ""
	}
	return f, func() {
		if entry != "" {
			os.Remove(entry)
		}
		f.Close()
	}, nil
}

// loadRAM copies the saved memory into the memfd f and seals it.
func (t *Template) loadRAM(f *os.File) error {
	in, err := os.Open(filepath.Join(t.Dir, ramFile))
	if err != nil {
		return err
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sparse.CopyData(ctx, f, in, int64(t.MemoryMiB)<<20); err != nil {
		return fmt.Errorf("template %s: load memory: %w", t.Key, err)
	}
	return hv.Seal(f)
}

// sharedRAM opens a memfd another process offers in dir, or returns nil.
// An entry is PID-FD holding the memfd's device and inode: a dead process,
// or a reused pid or descriptor number, does not match and is dropped.
func (t *Template) sharedRAM(dir string) *os.File {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		pid, fd, ok := strings.Cut(e.Name(), "-")
		if !ok {
			os.Remove(path)
			continue
		}
		want, _ := os.ReadFile(path)
		// Non-blocking: a reused pid's descriptor may be a pipe, whose
		// open would wait for a writer.
		f, err := os.OpenFile("/proc/"+pid+"/fd/"+fd, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			if p, perr := strconv.Atoi(pid); perr == nil && unix.Kill(p, 0) == unix.ESRCH {
				os.Remove(path)
			}
			continue
		}
		if id, size := fileID(f); id == string(want) && size == int64(t.MemoryMiB)<<20 && hv.Sealed(f) {
			return f
		}
		f.Close()
	}
	return nil
}

// offer records that this process holds the memfd f in dir; it returns
// the entry, for removal.
func offer(dir string, f *os.File) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	id, _ := fileID(f)
	entry := filepath.Join(dir, strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(int(f.Fd())))
	tmp := entry + ".tmp"
	if err := os.WriteFile(tmp, []byte(id), 0o600); err != nil {
		return "", err
	}
	return entry, os.Rename(tmp, entry)
}

func fileID(f *os.File) (string, int64) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return "", -1
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), st.Size
}
