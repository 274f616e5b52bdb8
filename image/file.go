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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w: %w", err, errdefs.ErrInternal)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w: %w", path, err, errdefs.ErrInternal)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctxErr(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
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

// closeDurably makes f readable by all, flushes it to disk and closes it, so
// that a rename that follows never exposes a partly written file.
func closeDurably(f *os.File) error {
	err := f.Chmod(0o644)
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
