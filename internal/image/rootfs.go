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
	"strings"
	"sync/atomic"

	"github.com/Microsoft/hcsshim/ext4/tar2ext4"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

// ext4Options: OCI whiteouts become overlayfs ones (".wh.x" a 0:0 character
// device x, ".wh..wh..opq" the xattr trusted.overlay.opaque=y on its
// directory), and small files live in their inodes (smaller images; inline
// data only rules out DAX, which the guest does not use). tar2ext4 reserves
// metadata for a 16 GiB file system by default; convert retries bigger layers.
var ext4Options = []tar2ext4.Option{tar2ext4.ConvertWhiteout, tar2ext4.InlineData}

// layerSuffix ends the name of each converted layer. Its version is the
// conversion's: it changes whenever a layer converts to other content, so
// that no layer converted by an older rule is used again (an older one is
// removed when its layer is converted anew, or by GC). Format 2 drops
// device nodes (fixLayer).
const layerSuffix = ".v2.ext4"

// staleLayer reports whether a name in layers/ is a converted layer of an
// older format: <hex>.ext4 (format 1) or <hex>.vN.ext4.
func staleLayer(hex, name string) bool {
	rest, ok := strings.CutPrefix(name, hex)
	if !ok || rest == layerSuffix || !strings.HasSuffix(rest, ".ext4") {
		return false
	}
	v := strings.TrimSuffix(rest, ".ext4")
	return v == "" || len(v) > 2 && v[:2] == ".v" && strings.Trim(v[2:], "0123456789") == ""
}

var errConvertDone = errors.New("conversion ended")

// conversions counts the layers converted by this process, for tests.
var conversions atomic.Int64

// Rootfs returns the layers of img as ext4 image files, bottom layer first,
// for the guest to mount read-only and stack with overlayfs
// (lowerdir=top:...:bottom). Each layer is converted once, cached under
// layers/<DiffID hex>.v2.ext4 and shared by all images that have it; concurrent
// callers, also in other processes, wait for one conversion. A conversion is
// written to a temporary file and renamed into place, and the layer's content
// is checked against its DiffID, so no crash or bad blob leaves a wrong entry.
func (s *Store) Rootfs(ctx context.Context, img Image) ([]string, error) {
	paths, err := s.rootfs(ctx, img)
	if err != nil {
		ref := img.Name
		if ref == "" {
			ref = img.Digest
		}
		return nil, fmt.Errorf("image rootfs %q: %w", ref, err)
	}
	return paths, nil
}

func (s *Store) rootfs(ctx context.Context, img Image) ([]string, error) {
	h, err := v1.NewHash(img.Digest)
	if err != nil {
		return nil, fmt.Errorf("digest: %w: %w", err, errdefs.ErrInvalidArgument)
	}
	// From the blobs, not the index: a box's image may have lost its names.
	if _, err := os.Stat(filepath.Join(s.blobDir(), h.Hex)); err != nil {
		return nil, fmt.Errorf("%s: %w", h, errdefs.ErrNotFound)
	}
	m, cf, err := s.manifestAndConfig(h)
	if err != nil {
		return nil, err
	}
	var paths []string
	b := newBudget("image "+h.String(), s.limits) // the layers converted now; the others were, before
	for i, diffID := range cf.RootFS.DiffIDs {
		blob := blobLayer{path: filepath.Join(s.blobDir(), m.Layers[i].Digest.Hex), desc: m.Layers[i]}
		open := func() (io.ReadCloser, error) {
			l, err := partial.CompressedToLayer(blob)
			if err != nil {
				return nil, err
			}
			return l.Uncompressed() // gunzips (or not) by the content's first bytes
		}
		where := join(b.image, "layer "+m.Layers[i].Digest.String())
		p, err := s.layerExt4(ctx, diffID, open, func(r io.Reader) *layerReader { return newLayerReader(r, s.limits, b, where) })
		if err != nil {
			if errdefs.KindOf(err) != errdefs.KindLimit {
				err = fmt.Errorf("layer %s: %w", diffID, err)
			}
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// layerExt4 returns the cached ext4 image of a layer, converting it first if needed.
// The layer is read through a layerReader that limit makes.
func (s *Store) layerExt4(ctx context.Context, diffID v1.Hash, open func() (io.ReadCloser, error), limit func(io.Reader) *layerReader) (string, error) {
	final := filepath.Join(s.dir, "layers", diffID.Hex+layerSuffix)
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "layers", diffID.Hex+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		return final, nil // converted while we waited
	}

	f, err := os.CreateTemp(filepath.Dir(final), "."+diffID.Hex+layerSuffix+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	defer os.Remove(f.Name()) // no-op once renamed
	err = convert(ctx, f, diffID, open, limit, ext4Options...)
	if err != nil && strings.Contains(err.Error(), "disk exceeded maximum size") {
		// Over 16 GiB: reserve metadata for 16 TiB (4 MiB more in the file).
		if err = f.Truncate(0); err == nil {
			err = convert(ctx, f, diffID, open, limit, append(ext4Options, tar2ext4.MaximumDiskSize(-1))...)
		}
	}
	if err == nil {
		if err = closeDurably(f); err == nil {
			err = os.Rename(f.Name(), final)
		}
	} else {
		f.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctxErr(ctx)
		}
		if errdefs.KindOf(err) == errdefs.KindInternal && !errors.Is(err, errdefs.ErrInternal) {
			err = fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
		}
		return "", err
	}
	conversions.Add(1)
	// What an older format left of this layer is not to be used again (a
	// running box keeps its open copy).
	if olds, err := filepath.Glob(filepath.Join(s.dir, "layers", diffID.Hex+".*ext4")); err == nil {
		for _, p := range olds {
			if staleLayer(diffID.Hex, filepath.Base(p)) {
				os.Remove(p)
			}
		}
	}
	return final, nil
}

// convert writes the layer as an ext4 image to f, from its start, and checks
// that the layer's content has digest diffID.
func convert(ctx context.Context, f *os.File, diffID v1.Hash, open func() (io.ReadCloser, error), limit func(io.Reader) *layerReader, opts ...tar2ext4.Option) (err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	lr := limit(io.TeeReader(ctxReader{ctx, rc}, h))
	defer func() {
		if err != nil {
			lr.release() // a retry counts the layer anew
		}
	}()
	// tar2ext4 reads the layer through fixLayer, which makes it follow the OCI rules.
	pr, pw := io.Pipe()
	fixed := make(chan error, 1)
	go func() {
		err := fixLayer(pw, lr)
		pw.CloseWithError(err)
		fixed <- err
	}()
	err = tar2ext4.ConvertTarToExt4(pr, f, opts...)
	pr.CloseWithError(errConvertDone) // unblocks fixLayer if tar2ext4 stopped reading early
	if ferr := <-fixed; ferr != nil && !errors.Is(ferr, errConvertDone) {
		err = ferr // the cause; tar2ext4 saw only a failed read
	}
	if errdefs.KindOf(err) == errdefs.KindLimit {
		return err // names the image, layer and file already
	}
	if err != nil {
		return fmt.Errorf("convert to ext4: %w", err)
	}
	if err := lr.Finish(); err != nil { // the DiffID covers the padding after the tar's end
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != diffID.Hex {
		return fmt.Errorf("content does not match the DiffID: %w", errdefs.ErrInternal)
	}
	return nil
}

// blobLayer is a layer blob of the store, for go-containerregistry to uncompress.
type blobLayer struct {
	path string
	desc v1.Descriptor
}

func (b blobLayer) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b blobLayer) Compressed() (io.ReadCloser, error)  { return os.Open(b.path) }
func (b blobLayer) Size() (int64, error)                { return b.desc.Size, nil }
func (b blobLayer) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
