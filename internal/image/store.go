package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

// Image is one name of an image in the store (Name is "" for an unnamed image).
type Image struct {
	Name   string  `json:"name"`   // canonical, e.g. "docker.io/library/alpine:latest"
	Digest string  `json:"digest"` // manifest digest, "sha256:..."
	Config Config  `json:"config"`
	Layers []Layer `json:"layers"` // bottom layer first
	Size   int64   `json:"size"`   // bytes of the layer blobs in the store
	// CachedAt is when its manifest reached the store (zero if unknown).
	CachedAt time.Time `json:"cached_at"`
}

// Config is the part of the image configuration that says how to run it.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Layer is one layer of an image.
type Layer struct {
	DiffID string `json:"diff_id"` // digest of the uncompressed layer tar
	Size   int64  `json:"size"`    // bytes of the layer blob in the store (compressed or not, as stored)
}

// Store is a content-addressed image store in a directory:
//
//	oci/               an OCI image layout: blobs/sha256/<hex>, and index.json with one
//	                   entry per name (annotation org.opencontainers.image.ref.name) and
//	                   one per unnamed image; the only mutable file, replaced atomically
//	lock               flock held while index.json is rewritten
//	layers/<hex>.v2.ext4  each layer as an ext4 image, by DiffID and conversion format
//	                   (layerSuffix; see Rootfs); <hex>.lock
//	tmp/load-*/        staging for loads and pulls (pull-*), each flocked by its user;
//	                   a blob enters oci/blobs only by rename, verified, under the lock
//
// A Store is safe for concurrent use, also by several processes. Blobs no
// image needs stay until GC.
type Store struct {
	dir    string
	oci    layout.Path
	limits Limits
}

const (
	refNameAnnotation    = "org.opencontainers.image.ref.name"
	containerdAnnotation = "io.containerd.image.name"
)

// Open opens the store in dir, creating it if needed. Options: WithLimits.
func Open(dir string, opts ...StoreOption) (*Store, error) {
	s := &Store{dir: dir, oci: layout.Path(filepath.Join(dir, "oci")), limits: DefaultLimits}
	for _, opt := range opts {
		opt(s)
	}
	for _, d := range []string{s.blobDir(), filepath.Join(dir, "layers"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store %q: %w: %w", dir, err, errdefs.ErrInternal)
		}
	}
	// Create index.json under the lock, so that a concurrent Open cannot clobber a Load.
	if err := s.update(func(*v1.IndexManifest) error { return nil }); err != nil {
		return nil, fmt.Errorf("image store %q: %w", dir, err)
	}
	return s, nil
}

func (s *Store) blobDir() string { return filepath.Join(string(s.oci), "blobs", "sha256") }

// Get returns the image named ref ("alpine", "alpine:latest" and
// "docker.io/library/alpine:latest" are the same name), or the image whose
// manifest digest is ref ("sha256:<hex>", or a unique prefix of 12 or more
// hex digits). A full "sha256:<hex>" also finds an image that has lost its
// names (Remove), until GC removes it.
func (s *Store) Get(ref string) (Image, error) {
	ix, err := s.index()
	if err != nil {
		return Image{}, fmt.Errorf("image get %q: %w", ref, err)
	}
	d, err := s.find(ix, ref)
	if err != nil {
		return Image{}, fmt.Errorf("image get %q: %w", ref, err)
	}
	img, err := s.image(d)
	if err != nil {
		return Image{}, fmt.Errorf("image get %q: %w", ref, err)
	}
	return img, nil
}

// find returns the index entry for ref; for a full digest whose names are
// all removed, it returns the image as long as its manifest is in the store
// (until GC): boxes refer to their images by digest.
func (s *Store) find(ix *v1.IndexManifest, ref string) (v1.Descriptor, error) {
	i, err := lookup(ix, ref)
	if err == nil {
		return ix.Manifests[i[0]], nil
	}
	if h, herr := v1.NewHash(ref); errors.Is(err, errdefs.ErrNotFound) && herr == nil && len(h.Hex) == 64 {
		if _, _, merr := s.manifestAndConfig(h); merr == nil { // and not some other blob
			return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h}, nil
		}
	}
	return v1.Descriptor{}, err
}

// List returns every image once per name, and once for each unnamed image, sorted by name.
func (s *Store) List() ([]Image, error) {
	ix, err := s.index()
	if err != nil {
		return nil, fmt.Errorf("image list: %w", err)
	}
	imgs := make([]Image, 0, len(ix.Manifests))
	for _, d := range ix.Manifests {
		img, err := s.image(d)
		if err != nil {
			return nil, fmt.Errorf("image list: %w", err)
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// Remove removes the name ref; when ref is a digest (other than the name a
// pull by digest gave), it removes the image with all its names. The blobs
// stay until GC; a box that uses the image keeps working, as core passes GC
// the images of its boxes.
func (s *Store) Remove(ref string) error {
	err := s.update(func(ix *v1.IndexManifest) error {
		i, err := lookup(ix, ref)
		if err != nil {
			return err
		}
		for k := len(i) - 1; k >= 0; k-- {
			ix.Manifests = append(ix.Manifests[:i[k]], ix.Manifests[i[k]+1:]...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("image remove %q: %w", ref, err)
	}
	return nil
}

// Tag gives the image ref the name newName too, moving newName from the image
// it named before, as docker tag does.
func (s *Store) Tag(ref, newName string) error {
	n, err := canonical(newName)
	if err == nil {
		err = s.update(func(ix *v1.IndexManifest) error {
			i, err := lookup(ix, ref)
			if err != nil {
				return err
			}
			setNames(ix, ix.Manifests[i[0]], []string{n})
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("image tag %q %q: %w", ref, newName, err)
	}
	return nil
}

// canonical returns the store's form of a tag reference: "alpine" becomes
// "docker.io/library/alpine:latest". Digest references are not names.
func canonical(ref string) (string, error) {
	t, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("invalid image name %q: %w", ref, errdefs.ErrInvalidArgument)
	}
	return dockerIO(t.Name()), nil
}

// canonicalDigest is the store's name for a digest reference, which the
// image that a pull by digest brings gets: "python@sha256:…" becomes
// "docker.io/library/python@sha256:…". When the digest is an index's, this
// name is the only way to find the image by it without asking the registry.
func canonicalDigest(d name.Digest) string {
	return dockerIO(d.Context().Name()) + "@" + d.DigestStr()
}

func dockerIO(n string) string {
	if rest, ok := strings.CutPrefix(n, name.DefaultRegistry+"/"); ok {
		return "docker.io/" + rest // go-containerregistry says index.docker.io; people say docker.io
	}
	return n
}

// lookup returns the positions in ix of the entry named ref, or of every
// entry of the image whose digest is (or starts with) ref.
func lookup(ix *v1.IndexManifest, ref string) ([]int, error) {
	if hex, ok := strings.CutPrefix(ref, "sha256:"); ok {
		return lookupDigest(ix, hex)
	}
	r, err := name.ParseReference(ref)
	if err == nil {
		if d, ok := r.(name.Digest); ok {
			n := canonicalDigest(d)
			for i, e := range ix.Manifests {
				if e.Annotations[refNameAnnotation] == n {
					return []int{i}, nil
				}
			}
			return lookupDigest(ix, strings.TrimPrefix(d.DigestStr(), "sha256:"))
		}
		n, _ := canonical(ref)
		for i, d := range ix.Manifests {
			if d.Annotations[refNameAnnotation] == n {
				return []int{i}, nil
			}
		}
	}
	if len(ref) >= 12 && isHex(ref) {
		return lookupDigest(ix, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid image reference: %w", errdefs.ErrInvalidArgument)
	}
	return nil, errdefs.ErrNotFound
}

func lookupDigest(ix *v1.IndexManifest, prefix string) ([]int, error) {
	if len(prefix) < 12 || len(prefix) > 64 || !isHex(prefix) {
		return nil, fmt.Errorf("want sha256: and 12 to 64 hex digits: %w", errdefs.ErrInvalidArgument)
	}
	var found []int
	for i, d := range ix.Manifests {
		if strings.HasPrefix(d.Digest.Hex, prefix) {
			if len(found) > 0 && ix.Manifests[found[0]].Digest != d.Digest {
				return nil, fmt.Errorf("digest prefix is ambiguous: %w", errdefs.ErrInvalidArgument)
			}
			found = append(found, i)
		}
	}
	if len(found) == 0 {
		return nil, errdefs.ErrNotFound
	}
	return found, nil
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}

// setNames points names at the image desc and lists desc. An image that loses
// its last name stays in the store unnamed, as a re-tagged image does in docker.
func setNames(ix *v1.IndexManifest, desc v1.Descriptor, names []string) {
	desc.Annotations = nil
	ix.Manifests = append(ix.Manifests, desc)
	for _, n := range names {
		for i, d := range ix.Manifests {
			if d.Annotations[refNameAnnotation] == n {
				d.Annotations = nil
				ix.Manifests[i] = d
			}
		}
		d := desc
		d.Annotations = map[string]string{refNameAnnotation: n}
		ix.Manifests = append(ix.Manifests, d)
	}
}

// tidy keeps one unnamed entry only for images that have no name, drops
// duplicates and sorts: named entries by name, then unnamed ones by digest.
func tidy(ix *v1.IndexManifest) {
	named := map[v1.Hash]bool{}
	for _, d := range ix.Manifests {
		if d.Annotations[refNameAnnotation] != "" {
			named[d.Digest] = true
		}
	}
	seen := map[string]bool{}
	out := ix.Manifests[:0]
	for _, d := range ix.Manifests {
		n := d.Annotations[refNameAnnotation]
		if n == "" {
			d.Annotations = nil
		}
		key := n + "@" + d.Digest.String()
		if (n == "" && named[d.Digest]) || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Annotations[refNameAnnotation], out[j].Annotations[refNameAnnotation]
		if (a == "") != (b == "") {
			return b == ""
		}
		if a != b {
			return a < b
		}
		return out[i].Digest.Hex < out[j].Digest.Hex
	})
	ix.Manifests = out
}

// index reads index.json. It needs no lock: writers replace it atomically.
func (s *Store) index() (*v1.IndexManifest, error) {
	f, err := os.Open(filepath.Join(string(s.oci), "index.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	defer f.Close()
	ix, err := v1.ParseIndexManifest(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", f.Name(), err, errdefs.ErrInternal)
	}
	return ix, nil
}

// update changes index.json with fn under the store lock, creating it if needed.
func (s *Store) update(fn func(*v1.IndexManifest) error) error {
	unlock, err := lockFile(context.Background(), filepath.Join(s.dir, "lock"))
	if err != nil {
		return err
	}
	defer unlock()
	return s.updateLocked(fn)
}

// updateLocked is update for a caller that holds the store lock.
func (s *Store) updateLocked(fn func(*v1.IndexManifest) error) error {
	ix, err := s.index()
	created := errors.Is(err, os.ErrNotExist)
	if created {
		ix, err = &v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}, nil
		if err := writeFileAtomic(filepath.Join(string(s.oci), "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	before, _ := json.Marshal(ix)
	if err := fn(ix); err != nil {
		return err
	}
	tidy(ix)
	if ix.Manifests == nil {
		ix.Manifests = []v1.Descriptor{} // "manifests": [] as the spec wants, not null
	}
	after, err := json.Marshal(ix)
	if err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrInternal)
	}
	if !created && bytes.Equal(before, after) {
		return nil
	}
	return writeFileAtomic(filepath.Join(string(s.oci), "index.json"), after)
}

// image reads the manifest and config of the image that d points to.
func (s *Store) image(d v1.Descriptor) (Image, error) {
	m, cf, err := s.manifestAndConfig(d.Digest)
	if err != nil {
		return Image{}, err
	}
	img := Image{
		Name:   d.Annotations[refNameAnnotation],
		Digest: d.Digest.String(),
		Config: Config{
			Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
			Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd,
		},
	}
	if st, err := os.Stat(filepath.Join(s.blobDir(), d.Digest.Hex)); err == nil {
		img.CachedAt = st.ModTime().UTC()
	}
	for i, l := range m.Layers {
		img.Layers = append(img.Layers, Layer{DiffID: cf.RootFS.DiffIDs[i].String(), Size: l.Size})
		img.Size += l.Size
	}
	return img, nil
}

func (s *Store) manifestAndConfig(h v1.Hash) (*v1.Manifest, *v1.ConfigFile, error) {
	m, cf, err := func() (*v1.Manifest, *v1.ConfigFile, error) {
		raw, err := s.oci.Bytes(h)
		if err != nil {
			return nil, nil, err
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, err
		}
		raw, err = s.oci.Bytes(m.Config.Digest)
		if err != nil {
			return nil, nil, err
		}
		cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, err
		}
		return m, cf, checkLayers(m, cf)
	}()
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w: %w", h, err, errdefs.ErrInternal)
	}
	return m, cf, nil
}

// checkLayers checks that the config has a DiffID for each layer of the manifest.
func checkLayers(m *v1.Manifest, cf *v1.ConfigFile) error {
	if len(m.Layers) != len(cf.RootFS.DiffIDs) {
		return fmt.Errorf("manifest has %d layers but config has %d diff_ids", len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	return nil
}
