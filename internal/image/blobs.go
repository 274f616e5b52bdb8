package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/boxlite/boxlite/errdefs"
)

// stageExisting says whether the stage directory staged or the store has
// the blob h, and its size. It stages a hard link to the store's copy: a GC
// that runs before the commit may remove the store's name for it, but not the
// staged one. (Where hard links fail, the store's copy is trusted to stay.)
func (s *Store) stageExisting(staged string, h v1.Hash) (int64, bool) {
	p, stored := filepath.Join(staged, h.Hex), filepath.Join(s.blobDir(), h.Hex)
	fi, err := os.Stat(p)
	if err != nil {
		if os.Link(stored, p) == nil {
			fi, err = os.Stat(p)
		} else {
			fi, err = os.Stat(stored)
		}
	}
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// writeBlob copies r to dir/<hex of want> if its content has digest want
// (and size bytes, unless size < 0), and returns its size. Nothing but the
// verified blob ever has that name. It reads at most size+1 bytes of r, so
// a source that sends more than it declared cannot fill the disk.
func writeBlob(ctx context.Context, dir string, want v1.Hash, size int64, r io.Reader) (int64, error) {
	return writeBlobChecked(ctx, dir, want, size, r, nil)
}

// writeBlobChecked is writeBlob that also has check read the content as it
// is copied (see walkLayer); the blob is kept only if check returns nil, and
// a check that fails stops the copy at once. check's error is returned as it is.
func writeBlobChecked(ctx context.Context, dir string, want v1.Hash, size int64, r io.Reader, check func(io.Reader) error) (int64, error) {
	if want.Algorithm != "sha256" {
		return 0, fmt.Errorf("%s: digest algorithm: %w", want, errdefs.ErrUnsupported)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	defer os.Remove(f.Name()) // no-op once renamed
	if size >= 0 {
		r = io.LimitReader(r, size+1)
	}
	h := sha256.New()
	src := &readErr{r: ctxReader{ctx, r}}
	var in io.Reader = src
	var tee *teeCheck
	if check != nil {
		tee = startCheck(src, check)
		in = tee
	}
	n, err := io.Copy(io.MultiWriter(f, h), in)
	var cerr error
	if tee != nil {
		cerr = tee.wait(err)
	}
	switch {
	case ctx.Err() != nil:
		err = ctxErr(ctx)
	case src.err != nil: // a bad source, unless it says otherwise
		err = fmt.Errorf("%s: %w", want, withKind(src.err, errdefs.ErrInvalidArgument))
	case cerr != nil:
		err = cerr
	case err != nil:
		err = fmt.Errorf("%s: %w: %w", want, err, errdefs.ErrInternal)
	case size >= 0 && n != size:
		err = fmt.Errorf("%s: %d bytes, want %d: %w", want, n, size, errdefs.ErrInvalidArgument)
	case hex.EncodeToString(h.Sum(nil)) != want.Hex:
		err = fmt.Errorf("%s: content does not match digest: %w", want, errdefs.ErrInvalidArgument)
	}
	if err != nil {
		f.Close()
		return 0, err
	}
	if err := closeDurably(f); err != nil {
		return 0, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, want.Hex)); err != nil {
		return 0, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	return n, nil
}

// teeCheck passes what it reads to a check running in its own goroutine,
// in step: a read returns only once the check has taken its bytes.
type teeCheck struct {
	r    io.Reader
	pw   *io.PipeWriter
	done chan error
	werr error // the check's error, once it has stopped taking bytes
}

var errCheckDone = errors.New("check done")

func startCheck(r io.Reader, check func(io.Reader) error) *teeCheck {
	pr, pw := io.Pipe()
	t := &teeCheck{r: r, pw: pw, done: make(chan error, 1)}
	go func() {
		err := check(pr)
		if err == nil {
			_, err = io.Copy(io.Discard, pr) // what follows the content the check wanted
			if errors.Is(err, errCheckDone) {
				err = nil
			}
		}
		if err == nil {
			pr.CloseWithError(errCheckDone)
		} else {
			pr.CloseWithError(err)
		}
		t.done <- err
	}()
	return t
}

func (t *teeCheck) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		if _, werr := t.pw.Write(p[:n]); werr != nil {
			t.werr = werr
			return n, werr
		}
	}
	return n, err
}

// wait ends the check's input (with the copy's error, if any) and returns the check's error.
func (t *teeCheck) wait(copyErr error) error {
	if copyErr != nil && !errors.Is(copyErr, t.werr) {
		t.pw.CloseWithError(copyErr)
	} else {
		t.pw.Close()
	}
	return <-t.done
}

// readErr remembers a read error, to tell a bad source from a failing store.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}
