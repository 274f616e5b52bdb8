package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

// Blob is one blob of an image as the store holds it.
type Blob struct {
	Digest string // "sha256:<hex>"
	Size   int64
	Path   string // the file in the store; read it, never change it
}

// OCILayoutFile is the oci-layout file of an OCI image layout.
const OCILayoutFile = `{"imageLayoutVersion":"1.0.0"}`

// Layout returns what an OCI image layout that holds only the image ref
// needs: its index.json (one manifest, unnamed) and its blobs, manifest and
// config first. Load reads such a layout back with the same digest; that is
// how a box export carries its image to a home that has never seen it.
func (s *Store) Layout(ref string) (index []byte, blobs []Blob, err error) {
	img, err := s.Get(ref)
	if err != nil {
		return nil, nil, err
	}
	h, err := v1.NewHash(img.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w: %w", img.Digest, err, errdefs.ErrInternal)
	}
	m, _, err := s.manifestAndConfig(h)
	if err != nil {
		return nil, nil, err
	}
	blob := func(h v1.Hash) (Blob, error) {
		p := filepath.Join(s.blobDir(), h.Hex)
		fi, err := os.Stat(p)
		if err != nil {
			return Blob{}, fmt.Errorf("image %s: blob %s: %w: %w", img.Digest, h, err, errdefs.ErrInternal)
		}
		return Blob{Digest: h.String(), Size: fi.Size(), Path: p}, nil
	}
	mb, err := blob(h)
	if err != nil {
		return nil, nil, err
	}
	blobs = append(blobs, mb)
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		b, err := blob(d.Digest)
		if err != nil {
			return nil, nil, err
		}
		blobs = append(blobs, b)
	}
	mt := m.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	index, err = json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{{MediaType: mt, Size: mb.Size, Digest: h}}})
	if err != nil {
		return nil, nil, err
	}
	return index, blobs, nil
}
