package image

import (
	"archive/tar"
	"context"
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
