package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
)

// lockFile takes an exclusive flock on path (created if needed) and returns
// its release. Each call opens the file anew, so the lock also excludes other
// goroutines of this process. It waits until ctx is done.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w: %w", err, errdefs.ErrInternal)
	}
	for {
		ok, err := tryFlock(f)
		if ok {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctxErr(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// tryFlock takes an exclusive flock on f if no one holds it.
func tryFlock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR) {
		return false, nil
	}
	return false, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
}

// newStage makes a staging directory tmp/<prefix>*, locked for as long as
// the load or pull that uses it runs: GC removes only the stages no one
// holds, left by a crash. It is made under the store lock, which GC holds,
// so GC never sees it before it is locked. done removes it.
func (s *Store) newStage(ctx context.Context, prefix string) (dir string, done func(), err error) {
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "lock"))
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	dir, err = os.MkdirTemp(filepath.Join(s.dir, "tmp"), prefix)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	f, err := os.Open(dir)
	if err == nil {
		if _, err = tryFlock(f); err != nil {
			f.Close()
		}
	}
	if err == nil {
		err = os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	return dir, func() { os.RemoveAll(dir); f.Close() }, nil
}

// withKind adds kind to err unless err already has an error kind.
func withKind(err, kind error) error {
	if errdefs.KindOf(err) != errdefs.KindInternal || errors.Is(err, errdefs.ErrInternal) {
		return err
	}
	return fmt.Errorf("%w: %w", err, kind)
}

// writeFileAtomic replaces path with data: readers see the old or the new
// file, never a part, also after a crash.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	defer os.Remove(f.Name()) // no-op once renamed
	_, err = f.Write(data)
	if err == nil {
		err = closeDurably(f)
	} else {
		f.Close()
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w: %w", path, err, errdefs.ErrInternal)
	}
	return nil
}

// closeDurably makes f private to its owner (0600), flushes it to disk and closes it, so
// that a rename that follows never exposes a partly written file.
func closeDurably(f *os.File) error {
	err := f.Chmod(0o600)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ctxReader fails reads once ctx is done, so long copies stop early.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, ctxErr(c.ctx)
	}
	return c.r.Read(p)
}

// ctxErr is ctx.Err(), with ErrTimeout added to a passed deadline.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ctx.Err(), errdefs.ErrTimeout)
	}
	return ctx.Err()
}
