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

// openSource finds the images in path. From a tar it unpacks the OCI layout
// parts (index.json, oci-layout, blobs, each blob verified) into stage.
func openSource(ctx context.Context, path, stage string, lim Limits) ([]source, error) {
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
		return layoutSources(path, lim)
	}
	a, err := unpackLayout(ctx, path, stage, lim)
	switch {
	case err != nil:
		return nil, err
	case a.oci:
		return layoutSources(stage, lim)
	case a.docker:
		return archiveSources(path, a, lim)
	}
	return nil, errNotImage
}

// archive is what unpackLayout found in a tar.
type archive struct {
	oci, docker bool                    // an OCI layout's index.json; a docker manifest.json
	entries     map[string]archiveEntry // by cleaned name, the first of each, as go-containerregistry's tarball finds them
}

type archiveEntry struct {
	size int64
	link string // for symlinks and hard links, the target
}

// size returns the size of the file name in the archive, following links as
// go-containerregistry's tarball does, or -1 when there is none.
func (a archive) size(name string) int64 {
	seen := map[string]bool{}
	for name = path.Clean(name); !seen[name]; {
		seen[name] = true
		e, ok := a.entries[name]
		if !ok {
			return -1
		}
		if e.link == "" {
			return e.size
		}
		name = path.Join(path.Dir(name), path.Clean(e.link))
	}
	return -1
}

// unpackLayout unpacks the OCI layout in the tar file path into stage, and
// says whether it found one, and whether the tar has a docker manifest.json.
// It refuses sparse files (docker and OCI tools never write them, and they
// would expand on the disk) and files bigger than any blob the limits allow.
func unpackLayout(ctx context.Context, file, stage string, lim Limits) (archive, error) {
	a := archive{entries: map[string]archiveEntry{}}
	f, err := os.Open(file)
	if err != nil {
		return a, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	var magic [2]byte
	if _, err := io.ReadFull(f, magic[:]); err == nil && magic == [2]byte{0x1f, 0x8b} {
		return a, fmt.Errorf("compressed archives are not supported, gunzip it first: %w", errdefs.ErrInvalidArgument)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return a, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	tr := tar.NewReader(ctxReader{ctx, f})
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return a, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return a, ctxErr(ctx)
			}
			return a, errNotImage
		}
		if int64(len(a.entries)) >= lim.MaxEntries {
			return a, errdefs.Errorf(errdefs.ErrLimit, "archive: more than %d entries", lim.MaxEntries)
		}
		key := path.Clean(hdr.Name)
		if _, ok := a.entries[key]; !ok {
			e := archiveEntry{size: hdr.Size}
			if hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeLink {
				e.link = hdr.Linkname
			}
			a.entries[key] = e
		}
		if hdr.Typeflag == tar.TypeGNUSparse || hasSparse(hdr) {
			return a, errdefs.Errorf(errdefs.ErrUnsupported, "archive entry %s: a sparse file", printable(key))
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > maxCompressed(lim.MaxLayerBytes) {
			return a, limitErr("archive entry "+printable(key), "", hdr.Size, maxCompressed(lim.MaxLayerBytes))
		}
		switch p := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/"); {
		case p == "manifest.json":
			a.docker = true
		case p == "index.json" || p == "oci-layout":
			if hdr.Size > lim.MaxManifestBytes {
				return a, limitErr(p, "", hdr.Size, lim.MaxManifestBytes)
			}
			b, err := io.ReadAll(io.LimitReader(tr, lim.MaxManifestBytes))
			if err == nil {
				err = os.WriteFile(filepath.Join(stage, p), b, 0o600)
			}
			if err != nil {
				return a, fmt.Errorf("%s: %w: %w", p, err, errdefs.ErrInvalidArgument)
			}
			a.oci = a.oci || p == "index.json"
		case strings.HasPrefix(p, "blobs/sha256/"):
			h, err := v1.NewHash("sha256:" + strings.TrimPrefix(p, "blobs/sha256/"))
			if err != nil {
				continue // not a blob
			}
			if _, err := writeBlob(ctx, filepath.Join(stage, "blobs", "sha256"), h, hdr.Size, tr); err != nil {
				return a, err
			}
		}
	}
}

// hasSparse says whether hdr has GNU sparse PAX records.
func hasSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// layoutSources lists the images of the OCI layout in dir. Before
// go-containerregistry reads index.json, a manifest, an index or a config
// (each whole, into memory), it checks that the file is within the limits.
func layoutSources(dir string, lim Limits) ([]source, error) {
	if fi, err := os.Stat(filepath.Join(dir, "index.json")); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("index.json is not a regular file: %w", errdefs.ErrInvalidArgument) // /dev/zero, a fifo
	} else if err == nil && fi.Size() > lim.MaxManifestBytes {
		return nil, limitErr("index.json", "", fi.Size(), lim.MaxManifestBytes)
	}
	blobSize := func(h v1.Hash) int64 {
		fi, err := os.Lstat(filepath.Join(dir, "blobs", h.Algorithm, h.Hex))
		if err != nil {
			return -1 // go-containerregistry says what is wrong
		}
		return fi.Size()
	}
	check := func(d v1.Descriptor) error {
		what := "manifest " + d.Digest.String()
		if d.MediaType.IsIndex() {
			what = "index " + d.Digest.String()
		}
		if n := max(d.Size, blobSize(d.Digest)); n > lim.MaxManifestBytes {
			return limitErr(what, "", n, lim.MaxManifestBytes)
		}
		return nil
	}
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
		img, err := platformImage(ii, d, check)
		if err != nil {
			if errdefs.KindOf(err) == errdefs.KindLimit {
				return nil, err
			}
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
		m, err := img.Manifest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", h, err, errdefs.ErrInvalidArgument)
		}
		if err := lim.checkDeclared("image "+h.String(), m); err != nil {
			return nil, err
		}
		if n := blobSize(m.Config.Digest); n > lim.MaxConfigBytes {
			return nil, limitErr("image "+h.String(), "config "+m.Config.Digest.String(), n, lim.MaxConfigBytes)
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
// check, if not nil, is called for each manifest and index before it is read.
func platformImage(ii v1.ImageIndex, d v1.Descriptor, check func(v1.Descriptor) error) (v1.Image, error) {
	switch d.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		if check != nil {
			if err := check(d); err != nil {
				return nil, err
			}
		}
		return ii.Image(d.Digest)
	case types.OCIImageIndex, types.DockerManifestList:
		if check != nil {
			if err := check(d); err != nil {
				return nil, err
			}
		}
		child, err := ii.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		return platformChild(child, check)
	}
	return nil, nil
}

// platformChild returns the linux/GOARCH image of the index ii, or nil.
func platformChild(ii v1.ImageIndex, check func(v1.Descriptor) error) (v1.Image, error) {
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, c := range im.Manifests {
		if c.Platform != nil && c.Platform.OS == "linux" && c.Platform.Architecture == runtime.GOARCH {
			if img, err := platformImage(ii, c, check); img != nil || err != nil {
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

// archiveSources lists the images of the docker archive file, whose entries
// a lists. go-containerregistry reads manifest.json and each config whole,
// so their sizes are checked first.
func archiveSources(file string, a archive, lim Limits) ([]source, error) {
	if n := a.size("manifest.json"); n > lim.MaxManifestBytes {
		return nil, limitErr("manifest.json", "", n, lim.MaxManifestBytes)
	}
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("manifest.json: %v: %w", err, errNotImage)
	}
	var out []source
	for _, d := range m {
		if n := a.size(d.Config); n > lim.MaxConfigBytes {
			return nil, limitErr("config "+printable(d.Config), "", n, lim.MaxConfigBytes)
		}
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
