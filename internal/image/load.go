package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

var errNotImage = fmt.Errorf("not an OCI layout or docker archive: %w", errdefs.ErrInvalidArgument)

// source is one image to load, with the names it comes with.
type source struct {
	img   v1.Image
	names []string // canonical
	// asIs keeps the blobs and manifest of an OCI layout, so its digest stays.
	// A docker archive has no manifest: it gets one, with uncompressed layers
	// (layer digest = DiffID), so loading it needs no gzip and Rootfs no gunzip.
	asIs bool
}

// Load imports the images in path: an OCI image layout directory, an OCI
// layout packed in a tar, or a docker archive as `docker save` writes it
// (docker 25 and later write both; the OCI index wins). Images keep the
// source's names: the archive's RepoTags, or the index.json annotation
// io.containerd.image.name or org.opencontainers.image.ref.name. A ref.name
// that is only a tag ("latest") names no repository, so that image is loaded
// unnamed (see Tag). From an index, the linux/GOARCH image is loaded.
//
// Every blob is checked against its digest in a staging directory and moved
// into the store only when all are there, so a failed load leaves nothing.
// Loading an image again changes nothing; a name that pointed to another image
// moves to the loaded one, as with docker load. Load returns the loaded images,
// once per name.
func (s *Store) Load(ctx context.Context, path string) ([]Image, error) {
	imgs, err := s.load(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("image load %q: %w", path, err)
	}
	return imgs, nil
}

func (s *Store) load(ctx context.Context, path string) ([]Image, error) {
	stage, done, err := s.newStage(ctx, "load-")
	if err != nil {
		return nil, err
	}
	defer done()

	srcs, err := openSource(ctx, path, stage, s.limits)
	if err != nil {
		return nil, err
	}
	descs := make([]v1.Descriptor, len(srcs))
	var blobs []v1.Hash // in commit order: a blob before the blobs that refer to it
	var counts layerCounts
	for i, src := range srcs {
		d, bs, err := s.ingest(ctx, stage, src, &counts)
		if err != nil {
			return nil, err
		}
		descs[i], blobs = d, append(blobs, bs...)
	}

	names := make([][]string, len(srcs))
	for i, src := range srcs {
		names[i] = src.names
	}
	return s.commit(stage, blobs, descs, names)
}

// commit moves the staged blobs into the store and gives the images descs
// their names, all under the store lock: GC, which holds it too, sees none or
// all of it, never blobs that an index entry is about to need. It returns the
// images once per name.
func (s *Store) commit(stage string, blobs []v1.Hash, descs []v1.Descriptor, names [][]string) ([]Image, error) {
	err := s.update(func(ix *v1.IndexManifest) error {
		for _, h := range blobs {
			err := os.Rename(filepath.Join(stage, "blobs", "sha256", h.Hex), filepath.Join(s.blobDir(), h.Hex))
			if errors.Is(err, fs.ErrNotExist) { // listed twice: moved already
				_, err = os.Stat(filepath.Join(s.blobDir(), h.Hex))
			}
			if err != nil {
				return fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
			}
		}
		for i, d := range descs {
			setNames(ix, d, names[i])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var out []Image
	for i, d := range descs {
		ns := names[i]
		if len(ns) == 0 {
			ns = []string{""}
		}
		for _, n := range ns {
			d := d
			if n != "" {
				d.Annotations = map[string]string{refNameAnnotation: n}
			}
			img, err := s.image(d)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		}
	}
	return out, nil
}

// ingest stages the blobs of src that the store lacks, and returns the
// descriptor of its manifest and its blobs in commit order. Each layer it
// stages is read through the limits (walkLayer) as it is copied; counts has
// the sizes of the layers staged before, by this load or pull.
func (s *Store) ingest(ctx context.Context, stage string, src source, counts *layerCounts) (v1.Descriptor, []v1.Hash, error) {
	staged := filepath.Join(stage, "blobs", "sha256")
	var b *budget
	put := func(h v1.Hash, size int64, open func() (io.ReadCloser, error), layer *v1.Descriptor) (int64, error) {
		if n, ok := s.stageExisting(staged, h); ok {
			if layer != nil {
				return n, b.add(join(b.image, "layer "+h.String()), counts.get(h))
			}
			return n, nil
		}
		rc, err := open()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", h, withKind(err, errdefs.ErrInvalidArgument))
		}
		defer rc.Close()
		var check func(io.Reader) error
		if layer != nil {
			check = walkLayer(s.limits, b, counts, *layer)
		}
		return writeBlobChecked(ctx, staged, h, size, rc, check)
	}
	bytesOf := func(b []byte) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	bad := func(err error) (v1.Descriptor, []v1.Hash, error) {
		if errdefs.KindOf(err) == errdefs.KindInternal && !errors.Is(err, errdefs.ErrInternal) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
		}
		return v1.Descriptor{}, nil, err
	}

	rawConfig, err := src.img.RawConfigFile()
	if err != nil {
		return bad(err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return bad(err)
	}
	// Not src.img.Manifest() for a docker archive: go-containerregistry would
	// gzip every layer to make one.
	m := &v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: v1.Descriptor{
		MediaType: types.OCIConfigJSON, Size: int64(len(rawConfig)), Digest: sha256Hash(rawConfig),
	}, Layers: []v1.Descriptor{}}
	b = newBudget("image config "+m.Config.Digest.String(), s.limits) // a docker archive's image ID
	if src.asIs {
		if m, err = src.img.Manifest(); err == nil {
			err = checkLayers(m, cf)
		}
		var h v1.Hash
		if err == nil {
			h, err = src.img.Digest()
		}
		if err != nil {
			return bad(err)
		}
		b = newBudget("image "+h.String(), s.limits)
		if err := s.limits.checkDeclared(b.image, m); err != nil {
			return bad(err)
		}
	}
	var blobs []v1.Hash
	for i, diffID := range cf.RootFS.DiffIDs {
		if src.asIs {
			l := m.Layers[i]
			_, err = put(l.Digest, l.Size, func() (io.ReadCloser, error) {
				layer, err := src.img.LayerByDigest(l.Digest)
				if err != nil {
					return nil, err
				}
				return layer.Compressed()
			}, &l)
			blobs = append(blobs, l.Digest)
		} else {
			var n int64
			n, err = put(diffID, -1, func() (io.ReadCloser, error) {
				layer, err := src.img.LayerByDiffID(diffID)
				if err != nil {
					return nil, err
				}
				return layer.Uncompressed()
			}, &v1.Descriptor{MediaType: types.OCIUncompressedLayer, Digest: diffID, Size: -1})
			m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: n, Digest: diffID})
			blobs = append(blobs, diffID)
		}
		if err != nil {
			if errdefs.KindOf(err) != errdefs.KindLimit {
				err = fmt.Errorf("layer %d: %w", i+1, err)
			}
			return bad(err)
		}
	}
	if _, err := put(m.Config.Digest, m.Config.Size, bytesOf(rawConfig), nil); err != nil {
		return bad(err)
	}
	desc := v1.Descriptor{MediaType: types.OCIManifestSchema1}
	var rawManifest []byte
	if src.asIs {
		if rawManifest, err = src.img.RawManifest(); err == nil {
			desc.Digest, err = src.img.Digest() // as the source's index says; put checks it
		}
		if err == nil {
			desc.MediaType, err = src.img.MediaType()
		}
	} else {
		rawManifest, err = json.Marshal(m)
		desc.Digest = sha256Hash(rawManifest)
	}
	if err != nil {
		return bad(err)
	}
	desc.Size = int64(len(rawManifest))
	if _, err := put(desc.Digest, desc.Size, bytesOf(rawManifest), nil); err != nil {
		return bad(err)
	}
	return desc, append(blobs, m.Config.Digest, desc.Digest), nil
}
