package image

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/boxlite/boxlite/errdefs"
)

// GCOptions says what GC keeps besides the images in the index.
type GCOptions struct {
	// InUse lists the digests ("sha256:…") of the images that boxes use. The
	// store cannot see boxes, so its user (boxlite.Runtime.PruneImages) says
	// which: GC keeps these images whole even when no name points to them.
	InUse []string
	// All also removes every image that InUse does not list, named or not, as
	// `docker image prune -a`. Without it GC removes only the unnamed images
	// that InUse does not list, as `docker image prune`.
	All bool
}

// GCResult is what GC removed.
type GCResult struct {
	Images []string // names (digests, for unnamed images) removed from the index
	Blobs  int      // manifests, configs and layers
	Layers int      // ext4 layer images
	Bytes  int64    // freed
}

// GC removes unused images (see GCOptions), then every blob and ext4 layer
// that no remaining image nor InUse needs, and what crashed loads, pulls and
// conversions left behind. It holds the store lock throughout, which loads
// and pulls take to commit, so it never removes what one is about to name;
// it skips a layer that is being converted.
func (s *Store) GC(ctx context.Context, o GCOptions) (GCResult, error) {
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "lock"))
	if err != nil {
		return GCResult{}, fmt.Errorf("image gc: %w", err)
	}
	defer unlock()
	res, err := s.gc(o)
	if err != nil {
		return res, fmt.Errorf("image gc: %w", err)
	}
	return res, nil
}

func (s *Store) gc(o GCOptions) (GCResult, error) {
	var res GCResult
	inUse := map[v1.Hash]bool{}
	for _, d := range o.InUse {
		h, err := v1.NewHash(d)
		if err != nil {
			return res, fmt.Errorf("in-use digest %q: %w", d, errdefs.ErrInvalidArgument)
		}
		inUse[h] = true
	}

	// Unused images leave the index first, so that a crash after it cannot
	// leave an entry whose blobs are gone.
	var kept []v1.Hash
	err := s.updateLocked(func(ix *v1.IndexManifest) error {
		out := ix.Manifests[:0]
		for _, d := range ix.Manifests {
			n := d.Annotations[refNameAnnotation]
			if !inUse[d.Digest] && (o.All || n == "") {
				res.Images = append(res.Images, cmp.Or(n, d.Digest.String()))
				continue
			}
			out = append(out, d)
			kept = append(kept, d.Digest)
		}
		ix.Manifests = out
		return nil
	})
	if err != nil {
		return res, err
	}

	// Mark what the remaining images and the boxes' images need.
	blobs, layers := map[string]bool{}, map[string]bool{}
	for h := range inUse {
		if _, err := os.Stat(filepath.Join(s.blobDir(), h.Hex)); err == nil {
			kept = append(kept, h)
		}
	}
	for _, h := range kept {
		m, cf, err := s.manifestAndConfig(h)
		if err != nil {
			return res, err // remove nothing from a store that does not read right
		}
		blobs[h.Hex], blobs[m.Config.Digest.Hex] = true, true
		for _, l := range m.Layers {
			blobs[l.Digest.Hex] = true
		}
		for _, d := range cf.RootFS.DiffIDs {
			layers[d.Hex] = true
		}
	}

	// Sweep.
	remove := func(p string) bool {
		fi, err := os.Lstat(p)
		if err == nil && os.RemoveAll(p) == nil {
			res.Bytes += fi.Size()
			return true
		}
		return false
	}
	entries, err := os.ReadDir(s.blobDir())
	if err != nil {
		return res, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	for _, e := range entries {
		if !blobs[e.Name()] && remove(filepath.Join(s.blobDir(), e.Name())) {
			res.Blobs++
		}
	}
	if err := s.sweepLayers(layers, remove, &res); err != nil {
		return res, err
	}
	// Leftovers of index.json rewrites that crashed (writers hold the lock we hold).
	if tmps, err := filepath.Glob(filepath.Join(string(s.oci), ".index.json.tmp-*")); err == nil {
		for _, p := range tmps {
			remove(p)
		}
	}
	// Stages that no load or pull holds: their process died.
	stages, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return res, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	for _, e := range stages {
		p := filepath.Join(s.dir, "tmp", e.Name())
		if f, err := os.Open(p); err == nil {
			if ok, _ := tryFlock(f); ok {
				os.RemoveAll(p)
			}
			f.Close()
		}
	}
	return res, nil
}

// sweepLayers removes the ext4 layers not in want, and what crashed
// conversions left, skipping the layers being converted (their lock is held).
func (s *Store) sweepLayers(want map[string]bool, remove func(string) bool, res *GCResult) error {
	dir := filepath.Join(s.dir, "layers")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	files := map[string][]string{} // by DiffID hex
	for _, e := range entries {
		n := e.Name()
		hex, _, _ := strings.Cut(strings.TrimPrefix(n, "."), ".")
		files[hex] = append(files[hex], n)
	}
	for hex, names := range files {
		f, err := os.OpenFile(filepath.Join(dir, hex+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		if ok, _ := tryFlock(f); !ok {
			f.Close()
			continue // being converted
		}
		for _, n := range names {
			switch {
			case n == hex+layerSuffix:
				if !want[hex] && remove(filepath.Join(dir, n)) {
					res.Layers++
				}
			case staleLayer(hex, n): // converted by an older rule: never used again
				if remove(filepath.Join(dir, n)) {
					res.Layers++
				}
			case n == hex+".lock":
			default: // .<hex>.v2.ext4.tmp-*: a conversion that died
				remove(filepath.Join(dir, n))
			}
		}
		if !want[hex] {
			os.Remove(f.Name()) // a waiter has it open: at worst, a layer is converted twice
		}
		f.Close()
	}
	return nil
}
