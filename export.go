package boxlite

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
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
)

// A box archive (BoxLite's .boxlite file) is a zstd-compressed tar of, in order:
//
//	manifest.json                 archiveManifest: the box's config, image digest, disk layout
//	disk.data                     the disk's data extents, concatenated (absent: no disk)
//	image/oci-layout              the box's image as an OCI image layout, so that it
//	image/index.json              imports where no registry can be reached
//	image/blobs/sha256/<hex>
//
// The disk travels sparse: only its data extents, each placed back at its
// offset on import; a 4 GiB disk that uses 10 MB costs about 10 MB.
const (
	archiveFormat  = "boxlite-box"
	archiveVersion = 1
	manifestEntry  = "manifest.json"
	diskEntry      = "disk.data"
	imagePrefix    = "image/"
	blobPrefix     = "image/blobs/sha256/"
)

// Limits on what an archive may claim, checked before anything is written.
const (
	maxManifestBytes = 1 << 20
	maxExtents       = 1 << 20
	maxImageEntries  = 4096
)

type archiveManifest struct {
	Format      string        `json:"format"`
	Version     int           `json:"version"`
	BoxID       string        `json:"box_id"` // the exported box's id, for the record
	Config      BoxConfig     `json:"config"`
	ImageDigest string        `json:"image_digest"`
	ExportedAt  time.Time     `json:"exported_at"`
	Disk        *archivedDisk `json:"disk,omitempty"` // nil: the box had no disk yet
}

type archivedDisk struct {
	Size    int64           `json:"size"`    // logical bytes
	Extents []sparse.Extent `json:"extents"` // data runs, in order; disk.data is their bytes
	SHA256  string          `json:"sha256"`  // of disk.data
}

// Export writes the box to one archive file (BoxLite's export): its
// configuration, its disk (sparse) and its image. A running box's disk is
// saved at one instant first (as a snapshot of it: synced, the VM stopped
// only for the copy). dest is a file, or a
// directory in which the archive is <name or id>.boxlite. It returns the
// archive's path. Volumes are left out: host paths do not travel.
func (b *Box) Export(ctx context.Context, dest string) (string, error) {
	const op = "export"
	if dest == "" {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: destination is empty", op)
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, firstNonEmpty(b.rec.Config.Name, b.rec.ID)+".boxlite")
	}
	diskPath, release, err := b.diskNow(ctx, op)
	if err != nil {
		return "", err
	}
	defer release()
	cfg := b.config()
	cfg.Volumes = nil
	m := archiveManifest{Format: archiveFormat, Version: archiveVersion, BoxID: b.rec.ID, Config: cfg,
		ImageDigest: b.rec.ImageDigest, ExportedAt: time.Now().UTC()}
	index, blobs, err := b.rt.images.Layout(b.rec.ImageDigest)
	if err != nil {
		return "", fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
	}
	disk, err := openDisk(diskPath)
	if err != nil {
		return "", fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
	}
	if disk != nil {
		defer disk.f.Close()
		m.Disk = &disk.archivedDisk
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if errors.Is(err, fs.ErrNotExist) {
		return "", errdefs.Errorf(errdefs.ErrNotFound, "%s: directory %s", op, filepath.Dir(dest))
	}
	if err != nil {
		return "", fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
	}
	err = writeArchive(ctx, tmp, m, disk, index, blobs)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("%s box %s to %s: %w", op, b.rec.ID, dest, err)
	}
	return dest, nil
}

// sparseDisk is an open disk with its layout and checksum.
type sparseDisk struct {
	f *os.File
	archivedDisk
}

// openDisk opens the disk at path and reads its layout and checksum (a
// first pass over its data); nil when there is no disk.
func openDisk(path string) (*sparseDisk, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := &sparseDisk{f: f}
	err = func() error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		d.Size = fi.Size()
		if d.Extents, err = sparse.Extents(f, d.Size); err != nil {
			return err
		}
		h := sha256.New()
		if _, err := io.Copy(h, d.reader()); err != nil {
			return err
		}
		d.SHA256 = hex.EncodeToString(h.Sum(nil))
		return nil
	}()
	if err != nil {
		f.Close()
		return nil, err
	}
	return d, nil
}

// reader reads the disk's extents, concatenated.
func (d *sparseDisk) reader() io.Reader {
	rs := make([]io.Reader, len(d.Extents))
	for i, e := range d.Extents {
		rs[i] = io.NewSectionReader(d.f, e.Off, e.Len)
	}
	return io.MultiReader(rs...)
}

func (d *archivedDisk) dataBytes() int64 {
	var n int64
	for _, e := range d.Extents {
		n += e.Len
	}
	return n
}

func writeArchive(ctx context.Context, w io.Writer, m archiveManifest, disk *sparseDisk, index []byte, blobs []image.Blob) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	put := func(name string, size int64, r io.Reader) error {
		if err := ctx.Err(); err != nil {
			return errdefs.Errorf(errdefs.ErrTimeout, "export cancelled: %v", err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size, Format: tar.FormatPAX}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: read %d bytes, expected %d (changed while exporting)", name, n, size)
		}
		return err
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := put(manifestEntry, int64(len(mj)), bytes.NewReader(mj)); err != nil {
		return err
	}
	if disk != nil {
		if err := put(diskEntry, disk.dataBytes(), disk.reader()); err != nil {
			return err
		}
	}
	if err := put(imagePrefix+"oci-layout", int64(len(image.OCILayoutFile)), strings.NewReader(image.OCILayoutFile)); err != nil {
		return err
	}
	if err := put(imagePrefix+"index.json", int64(len(index)), bytes.NewReader(index)); err != nil {
		return err
	}
	for _, bl := range blobs {
		f, err := os.Open(bl.Path)
		if err != nil {
			return err
		}
		err = put(blobPrefix+strings.TrimPrefix(bl.Digest, "sha256:"), bl.Size, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// ImportBox makes a new, stopped box from an archive that Export wrote
// (BoxLite's runtime.import_box), in this home, with its image loaded into
// the store if missing. name names the new box (default: unnamed, as
// BoxLite's). The archive is untrusted, and the box it makes is a new one,
// not the exported one: its entries, sizes and digests are checked; of its
// config only what describes the box's content is kept (image, env,
// entrypoint and cmd, user, working directory; see importer.config), and
// everything else (memory, CPUs, disk size, network, published ports,
// kernel arguments, boot timeout, detach, auto-remove) comes from opts, the
// importer's box options, else Create's defaults; the archive's disk must
// fit the disk size so chosen (ErrLimit), and an archive with volumes (host
// paths) is refused. A failed import leaves no box behind.
func (r *Runtime) ImportBox(ctx context.Context, path, name string, opts ...BoxOption) (*Box, error) {
	b, err := r.importBox(ctx, path, importer{name: name, opts: opts})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return b, nil
}

func (r *Runtime) importBox(ctx context.Context, path string, imp importer) (*Box, error) {
	if err := r.checkOpen("import"); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "archive path is empty")
	}
	if err := imp.check(); err != nil { // before any work
		return nil, err
	}
	if imp.name != "" {
		if _, err := r.find(imp.name); err == nil { // before any work (adopt checks again, under the lock)
			return nil, errdefs.Errorf(errdefs.ErrAlreadyExists, "box name %q is taken", imp.name)
		}
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.Errorf(errdefs.ErrNotFound, "archive %s", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20), zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	stage, err := r.newStage("import")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage) // renamed away when adopted
	m, err := r.unpack(ctx, tar.NewReader(zr), stage, imp)
	if err != nil {
		return nil, err
	}
	imgDir := filepath.Join(stage, "image")
	if err := checkImageIndex(filepath.Join(imgDir, "index.json"), m.ImageDigest); err != nil {
		return nil, err
	}
	imgs, err := r.images.Load(ctx, imgDir)
	if err != nil {
		return nil, err
	}
	if len(imgs) != 1 || imgs[0].Digest != m.ImageDigest {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "the archive's image is not %s, the image its box needs", m.ImageDigest)
	}
	if err := os.RemoveAll(imgDir); err != nil {
		return nil, err
	}
	// An archive carries no secret's value (nor the box's CA): the
	// imported box has none (their placeholders stay in its environment).
	m.Config.Secrets = nil
	return r.adopt(stage, m.Config, m.ImageDigest)
}

// unpack reads the archive into stage: the disk as disk.ext4, the image as
// an OCI layout in image/. It returns the manifest, its config replaced by
// the new box's (importer.config).
func (r *Runtime) unpack(ctx context.Context, tr *tar.Reader, stage string, imp importer) (archiveManifest, error) {
	var m archiveManifest
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: "+format, args...)
	}
	imageBudget := r.images.Limits().MaxImageBytes + 2*r.images.Limits().MaxManifestBytes
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return m, errdefs.Errorf(errdefs.ErrTimeout, "cancelled: %v", err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m, bad("%v", err)
		}
		if n > maxImageEntries+2 {
			return m, errdefs.Errorf(errdefs.ErrLimit, "archive: more than %d entries", maxImageEntries+2)
		}
		if hdr.Typeflag != tar.TypeReg {
			return m, bad("entry %q is not a regular file (type %q)", hdr.Name, hdr.Typeflag)
		}
		if seen[hdr.Name] {
			return m, bad("entry %q appears twice", hdr.Name)
		}
		seen[hdr.Name] = true
		if n == 0 && hdr.Name != manifestEntry {
			return m, bad("first entry is %q, not %s", hdr.Name, manifestEntry)
		}
		switch {
		case hdr.Name == manifestEntry:
			if m, err = readManifest(tr, hdr.Size, imp); err != nil {
				return m, err
			}
		case hdr.Name == diskEntry:
			if m.Disk == nil {
				return m, bad("%s is there but the manifest says the box has no disk", diskEntry)
			}
			if err := writeSparse(ctx, tr, hdr.Size, m.Disk, filepath.Join(stage, shimapi.DiskFile)); err != nil {
				return m, err
			}
		case hdr.Name == imagePrefix+"oci-layout" || hdr.Name == imagePrefix+"index.json" || isBlobEntry(hdr.Name):
			if hdr.Size < 0 || hdr.Size > imageBudget {
				return m, errdefs.Errorf(errdefs.ErrLimit, "archive: the image is over %d bytes", r.images.Limits().MaxImageBytes)
			}
			imageBudget -= hdr.Size
			if err := writeEntry(tr, hdr.Size, filepath.Join(stage, filepath.FromSlash(hdr.Name))); err != nil {
				return m, err
			}
		default:
			return m, bad("entry %q is not part of a box archive", hdr.Name)
		}
	}
	switch {
	case !seen[manifestEntry]:
		return m, bad("%s is missing", manifestEntry)
	case m.Disk != nil && !seen[diskEntry]:
		return m, bad("%s is missing", diskEntry)
	case !seen[imagePrefix+"index.json"]:
		return m, bad("the image (%sindex.json) is missing", imagePrefix)
	}
	return m, nil
}

// checkImageIndex checks, before the image is loaded (a load that is
// refused after leaves nothing; one accepted stays), that the archive's
// image is the one its box needs: one manifest, of that digest, unnamed
// (as Export writes it): names there would be loaded as this home's image
// names, moving one such as alpine:latest to the archive's image.
func checkImageIndex(path, digest string) error {
	var ix struct {
		Annotations map[string]string `json:"annotations"`
		Manifests   []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := readJSON(path, &ix); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: %sindex.json: %v", imagePrefix, err)
	}
	if len(ix.Manifests) != 1 || ix.Manifests[0].Digest != digest {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: the image in %sindex.json is not %s, the image the box needs", imagePrefix, digest)
	}
	if len(ix.Annotations) > 0 || len(ix.Manifests[0].Annotations) > 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: the image in %sindex.json has annotations (names); a box archive carries its image unnamed", imagePrefix)
	}
	return nil
}

func isBlobEntry(name string) bool {
	h, ok := strings.CutPrefix(name, blobPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// readManifest reads and checks the manifest: its format, its config (the
// content it keeps checked as Create checks options, the rest replaced by
// the importer's: importer.config) and its disk layout, which must fit the new
// box's disk size.
func readManifest(r io.Reader, size int64, imp importer) (archiveManifest, error) {
	var m archiveManifest
	if size > maxManifestBytes {
		return m, errdefs.Errorf(errdefs.ErrLimit, "archive: %s is %d bytes, over %d", manifestEntry, size, maxManifestBytes)
	}
	dec := json.NewDecoder(io.LimitReader(r, size))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: %s: %v", manifestEntry, err)
	}
	if m.Format != archiveFormat || m.Version != archiveVersion {
		return m, errdefs.Errorf(errdefs.ErrUnsupported, "archive: format %q version %d; this library reads %q version %d", m.Format, m.Version, archiveFormat, archiveVersion)
	}
	if !strings.HasPrefix(m.ImageDigest, "sha256:") || !isBlobEntry(blobPrefix+strings.TrimPrefix(m.ImageDigest, "sha256:")) {
		return m, errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: image digest %q is not sha256:<64 hex digits>", m.ImageDigest)
	}
	if len(m.Config.Volumes) > 0 {
		return m, errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: the box config has volumes (host paths); an imported box gets none")
	}
	cfg, err := imp.config(m.Config)
	if err != nil {
		return m, err
	}
	m.Config = cfg
	if d := m.Disk; d != nil {
		if err := checkLayout(d, int64(m.Config.DiskSizeGB)<<30); err != nil {
			return m, err
		}
	}
	return m, nil
}

// checkLayout checks a disk layout against the disk size the import allows.
func checkLayout(d *archivedDisk, max int64) error {
	bad := func(format string, args ...any) error {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: disk: "+format, args...)
	}
	if d.Size < 0 || d.Size > max {
		return errdefs.Errorf(errdefs.ErrLimit, "archive: disk: size %d is over the %d bytes this import allows (a larger disk needs a larger disk size among the import's options: WithDiskSizeGB, --disk-size)", d.Size, max)
	}
	if len(d.Extents) > maxExtents {
		return errdefs.Errorf(errdefs.ErrLimit, "archive: disk: %d extents, over %d", len(d.Extents), maxExtents)
	}
	var end int64
	for i, e := range d.Extents {
		if e.Off < end || e.Len <= 0 || e.Len > d.Size-e.Off {
			return bad("extent %d (%d+%d) overlaps, is empty or ends past the disk's %d bytes", i, e.Off, e.Len, d.Size)
		}
		end = e.Off + e.Len
	}
	if _, err := hex.DecodeString(d.SHA256); err != nil || len(d.SHA256) != 64 {
		return bad("sha256 %q is not 64 hex digits", d.SHA256)
	}
	return nil
}

// writeSparse writes the disk's data (size bytes from r) to a new sparse
// file at path, each extent at its offset, and checks its digest.
func writeSparse(ctx context.Context, r io.Reader, size int64, d *archivedDisk, path string) error {
	if size != d.dataBytes() {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: %s is %d bytes, its extents say %d", diskEntry, size, d.dataBytes())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &fs); err == nil {
		if free := int64(fs.Bavail) * fs.Bsize; size > free-minFreeMiB<<20 {
			return errdefs.Errorf(errdefs.ErrLimit, "archive: the disk holds %d bytes of data; the host has %d free (and keeps %d MiB)", size, free, minFreeMiB)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(d.Size); err != nil {
		return err
	}
	h := sha256.New()
	tee := io.TeeReader(r, h)
	buf := make([]byte, 1<<20)
	for _, e := range d.Extents {
		if err := ctx.Err(); err != nil {
			return errdefs.Errorf(errdefs.ErrTimeout, "cancelled: %v", err)
		}
		if _, err := io.CopyBuffer(io.NewOffsetWriter(f, e.Off), io.LimitReader(tee, e.Len), buf); err != nil {
			return err
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.SHA256 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "archive: %s has sha256 %s, the manifest says %s", diskEntry, got, d.SHA256)
	}
	return f.Sync()
}

// writeEntry writes size bytes of r to a new file at path (its parent made as needed).
func writeEntry(r io.Reader, size int64, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if n, err := io.CopyN(f, r, size); err != nil {
		return fmt.Errorf("%s: %d of %d bytes: %w", filepath.Base(path), n, size, err)
	}
	return nil
}
