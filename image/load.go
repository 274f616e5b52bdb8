package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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

	srcs, err := openSource(ctx, path, stage)
	if err != nil {
		return nil, err
	}
	descs := make([]v1.Descriptor, len(srcs))
	var blobs []v1.Hash // in commit order: a blob before the blobs that refer to it
	for i, src := range srcs {
		d, bs, err := s.ingest(ctx, stage, src)
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

// openSource finds the images in path. From a tar it unpacks the OCI layout
// parts (index.json, oci-layout, blobs, each blob verified) into stage.
func openSource(ctx context.Context, path, stage string) ([]source, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no such file or directory: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "index.json")); err != nil {
			return nil, errNotImage
		}
		return layoutSources(path)
	}
	oci, docker, err := unpackLayout(ctx, path, stage)
	switch {
	case err != nil:
		return nil, err
	case oci:
		return layoutSources(stage)
	case docker:
		return archiveSources(path)
	}
	return nil, errNotImage
}

// unpackLayout unpacks the OCI layout in the tar file path into stage, and
// says whether it found one, and whether the tar has a docker manifest.json.
func unpackLayout(ctx context.Context, file, stage string) (oci, docker bool, err error) {
	f, err := os.Open(file)
	if err != nil {
		return false, false, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	var magic [2]byte
	if _, err := io.ReadFull(f, magic[:]); err == nil && magic == [2]byte{0x1f, 0x8b} {
		return false, false, fmt.Errorf("compressed archives are not supported, gunzip it first: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, false, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	var index bool
	tr := tar.NewReader(ctxReader{ctx, f})
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return index, docker, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, false, ctxErr(ctx)
			}
			return false, false, errNotImage
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		switch p := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/"); {
		case p == "manifest.json":
			docker = true
		case p == "index.json" || p == "oci-layout":
			if hdr.Size > 16<<20 {
				return false, false, fmt.Errorf("%s is %d bytes: %w", p, hdr.Size, errdefs.ErrInvalidArgument)
			}
			b, err := io.ReadAll(tr)
			if err == nil {
				err = os.WriteFile(filepath.Join(stage, p), b, 0o600)
			}
			if err != nil {
				return false, false, fmt.Errorf("%s: %w: %w", p, err, errdefs.ErrInvalidArgument)
			}
			index = index || p == "index.json"
		case strings.HasPrefix(p, "blobs/sha256/"):
			h, err := v1.NewHash("sha256:" + strings.TrimPrefix(p, "blobs/sha256/"))
			if err != nil {
				continue // not a blob
			}
			if _, err := writeBlob(ctx, filepath.Join(stage, "blobs", "sha256"), h, hdr.Size, tr); err != nil {
				return false, false, err
			}
		}
	}
}

// layoutSources lists the images of the OCI layout in dir.
func layoutSources(dir string) ([]source, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errNotImage)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("index.json: %w: %w", err, errdefs.ErrInvalidArgument)
	}
	var out []source
	at := map[v1.Hash]int{}
	for _, d := range im.Manifests {
		img, err := platformImage(ii, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", d.Digest, err, errdefs.ErrInvalidArgument)
		}
		if img == nil {
			continue
		}
		n, err := annotatedName(d.Annotations)
		if err != nil {
			return nil, err
		}
		var names []string
		if n != "" {
			names = []string{n}
		}
		h, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", d.Digest, err, errdefs.ErrInvalidArgument)
		}
		if i, ok := at[h]; ok {
			out[i].names = append(out[i].names, names...)
			continue
		}
		at[h] = len(out)
		out = append(out, source{img: img, names: names, asIs: true})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no linux/%s image in index.json: %w", runtime.GOARCH, errdefs.ErrInvalidArgument)
	}
	return out, nil
}

// platformImage returns the image that d points to, choosing linux/GOARCH in
// an index, or nil when d is not a runnable image (an attestation, an artifact).
func platformImage(ii v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	switch d.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		return ii.Image(d.Digest)
	case types.OCIImageIndex, types.DockerManifestList:
		child, err := ii.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		return platformChild(child)
	}
	return nil, nil
}

// platformChild returns the linux/GOARCH image of the index ii, or nil.
func platformChild(ii v1.ImageIndex) (v1.Image, error) {
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, c := range im.Manifests {
		if c.Platform != nil && c.Platform.OS == "linux" && c.Platform.Architecture == runtime.GOARCH {
			if img, err := platformImage(ii, c); img != nil || err != nil {
				return img, err
			}
		}
	}
	return nil, nil
}

// annotatedName returns the name an index.json entry gives its image, or "".
func annotatedName(a map[string]string) (string, error) {
	n := a[containerdAnnotation]
	if n == "" {
		n = a[refNameAnnotation]
		if !strings.ContainsAny(n, "/:") || strings.Contains(n, "@") {
			return "", nil // only a tag (or a digest): no repository to name
		}
	}
	c, err := canonical(n)
	if err != nil {
		return "", fmt.Errorf("index.json: %w", err)
	}
	return c, nil
}

// archiveSources lists the images of the docker archive file.
func archiveSources(file string) ([]source, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("manifest.json: %v: %w", err, errNotImage)
	}
	var out []source
	for _, d := range m {
		var names []string
		var tag *name.Tag
		for _, t := range d.RepoTags {
			c, err := canonical(t)
			if err != nil {
				return nil, fmt.Errorf("manifest.json: %w", err)
			}
			names = append(names, c)
			if tag == nil {
				t, _ := name.NewTag(t)
				tag = &t
			}
		}
		if tag == nil && len(m) > 1 {
			return nil, fmt.Errorf("untagged image %s in a multi-image archive: %w", d.Config, errdefs.ErrUnsupported)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", d.Config, err, errdefs.ErrInvalidArgument)
		}
		out = append(out, source{img: img, names: names})
	}
	if len(out) == 0 {
		return nil, errNotImage
	}
	return out, nil
}

// ingest stages the blobs of src that the store lacks, and returns the
// descriptor of its manifest and its blobs in commit order.
func (s *Store) ingest(ctx context.Context, stage string, src source) (v1.Descriptor, []v1.Hash, error) {
	staged := filepath.Join(stage, "blobs", "sha256")
	put := func(h v1.Hash, size int64, open func() (io.ReadCloser, error)) (int64, error) {
		if n, ok := s.stageExisting(staged, h); ok {
			return n, nil
		}
		rc, err := open()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", h, withKind(err, errdefs.ErrInvalidArgument))
		}
		defer rc.Close()
		return writeBlob(ctx, staged, h, size, rc)
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
	if src.asIs {
		if m, err = src.img.Manifest(); err == nil {
			err = checkLayers(m, cf)
		}
		if err != nil {
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
			})
			blobs = append(blobs, l.Digest)
		} else {
			var n int64
			n, err = put(diffID, -1, func() (io.ReadCloser, error) {
				layer, err := src.img.LayerByDiffID(diffID)
				if err != nil {
					return nil, err
				}
				return layer.Uncompressed()
			})
			m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: n, Digest: diffID})
			blobs = append(blobs, diffID)
		}
		if err != nil {
			return bad(fmt.Errorf("layer %d: %w", i+1, err))
		}
	}
	if _, err := put(m.Config.Digest, m.Config.Size, bytesOf(rawConfig)); err != nil {
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
	if _, err := put(desc.Digest, desc.Size, bytesOf(rawManifest)); err != nil {
		return bad(err)
	}
	return desc, append(blobs, m.Config.Digest, desc.Digest), nil
}

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
// verified blob ever has that name.
func writeBlob(ctx context.Context, dir string, want v1.Hash, size int64, r io.Reader) (int64, error) {
	if want.Algorithm != "sha256" {
		return 0, fmt.Errorf("%s: digest algorithm: %w", want, errdefs.ErrUnsupported)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	defer os.Remove(f.Name()) // no-op once renamed
	h := sha256.New()
	src := &readErr{r: ctxReader{ctx, r}}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	switch {
	case ctx.Err() != nil:
		err = ctxErr(ctx)
	case src.err != nil: // a bad source, unless it says otherwise
		err = fmt.Errorf("%s: %w", want, withKind(src.err, errdefs.ErrInvalidArgument))
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
