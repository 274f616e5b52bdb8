package image

import (
	"archive/tar"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/boxlite/boxlite/errdefs"
)

// Limits bound what one image may cost the host. Images and registries are
// untrusted: a few kilobytes of gzip, or one sparse tar entry, can declare
// terabytes, which the ext4 conversion would write out. Exceeding a limit is
// ErrLimit, naming the image, the layer (or blob), the limit and the value.
// A zero field takes its default (DefaultLimits).
//
// The layer limits apply wherever a layer tar is read: when a Load or Pull
// brings a layer in (so a refused image never enters the store) and when
// Rootfs converts it. Sparse files count at their full logical size, since
// the conversion writes them out whole.
type Limits struct {
	MaxImageBytes    int64 // uncompressed bytes of the layers a load or pull brings in, or a Rootfs converts, for one image
	MaxLayerBytes    int64 // uncompressed bytes of one layer: its tar stream, or its entries' declared sizes if more
	MaxFileBytes     int64 // bytes of one file in a layer
	MaxEntries       int64 // entries of one layer, counting the parent directories they imply
	MaxManifestBytes int64 // one manifest or index (and index.json, manifest.json in archives)
	MaxConfigBytes   int64 // one image config
}

// DefaultLimits are the limits of a store opened without WithLimits. They
// are far above real images (python:slim is 148 MB uncompressed in one layer,
// about 5,000 entries; the largest common images, CUDA and ML stacks, are
// 10-15 GiB and a few hundred thousand entries, manifests and configs a few
// tens of KiB) and far below what would fill a host: an image costs at most
// about twice MaxImageBytes of disk (blobs plus ext4 layers).
var DefaultLimits = Limits{
	MaxImageBytes:    16 << 30,  // 16 GiB: the largest ML images, with room
	MaxLayerBytes:    8 << 30,   // 8 GiB: no real layer comes near it
	MaxFileBytes:     8 << 30,   // 8 GiB: a file may be all of its layer, not more
	MaxEntries:       1_000_000, // 1M: node_modules-heavy layers reach 200K; tar2ext4 holds every inode in memory
	MaxManifestBytes: 4 << 20,   // 4 MiB: real ones are 1-50 KiB; the OCI distribution spec suggests registries accept at least 4 MiB
	MaxConfigBytes:   4 << 20,   // 4 MiB: real ones are 1-30 KiB (long histories reach a few hundred KiB)
}

// maxPathBytes bounds entry names and link targets: the guest kernel cannot
// open a longer path (PATH_MAX), and each entry's name is kept in memory
// while a layer is converted, with a map entry for each directory it implies.
const maxPathBytes = 4096

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithLimits sets the store's limits; zero fields keep their defaults.
func WithLimits(l Limits) StoreOption {
	return func(s *Store) { s.limits = l.withDefaults() }
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int64 }{
		{&l.MaxImageBytes, &d.MaxImageBytes}, {&l.MaxLayerBytes, &d.MaxLayerBytes},
		{&l.MaxFileBytes, &d.MaxFileBytes}, {&l.MaxEntries, &d.MaxEntries},
		{&l.MaxManifestBytes, &d.MaxManifestBytes}, {&l.MaxConfigBytes, &d.MaxConfigBytes},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// Limits returns the store's limits.
func (s *Store) Limits() Limits { return s.limits }

// limitErr is the ErrLimit error "WHERE: WHAT: VALUE bytes, limit MAX".
func limitErr(where, what string, value, max int64) error {
	return errdefs.Errorf(errdefs.ErrLimit, "%s: %d bytes, limit %d", join(where, what), value, max)
}

func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}

// maxCompressed is the most bytes a compressed blob of at most n uncompressed
// bytes can have: gzip and zstd store incompressible data in blocks with a few
// bytes of framing each (deflate: 5 per 64 KiB), so 1/256 plus a header is
// generous. A manifest that claims more for a layer lies or breaks the limit.
func maxCompressed(n int64) int64 {
	return satAdd(n, n/256+64<<10)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// checkDeclared refuses, before anything is downloaded or copied, an image
// whose manifest declares a config or layers bigger than the limits allow.
func (l Limits) checkDeclared(image string, m *v1.Manifest) error {
	if m.Config.Size > l.MaxConfigBytes || m.Config.Size < 0 {
		return limitErr(image, "config "+m.Config.Digest.String(), m.Config.Size, l.MaxConfigBytes)
	}
	var total int64
	seen := map[v1.Hash]bool{}
	for _, d := range m.Layers {
		if d.Size > maxCompressed(l.MaxLayerBytes) || d.Size < 0 {
			return limitErr(image, "layer "+d.Digest.String(), d.Size, l.MaxLayerBytes)
		}
		if !seen[d.Digest] {
			seen[d.Digest], total = true, satAdd(total, d.Size)
		}
	}
	if total > maxCompressed(l.MaxImageBytes) {
		return limitErr(image, "layers", total, l.MaxImageBytes)
	}
	return nil
}

// budget counts the uncompressed bytes of one image's layers; layers read
// in parallel share it.
type budget struct {
	image string // "image sha256:…", for errors
	max   int64
	used  atomic.Int64
}

func newBudget(image string, l Limits) *budget { return &budget{image: image, max: l.MaxImageBytes} }

// add charges n bytes to the image, for the layer named where.
func (b *budget) add(where string, n int64) error {
	if b == nil {
		return nil
	}
	if used := b.used.Add(n); used > b.max {
		return errdefs.Errorf(errdefs.ErrLimit, "%s: image: %d bytes uncompressed, limit %d", where, used, b.max)
	}
	return nil
}

// layerCounts holds the uncompressed size of each layer blob a load or pull
// has staged, as counted when it came in, so that an image that reuses a
// staged layer (a pull falling back to another source) is charged for it.
type layerCounts struct {
	mu sync.Mutex
	m  map[v1.Hash]int64
}

func (c *layerCounts) set(h v1.Hash, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[v1.Hash]int64{}
	}
	c.m[h] = n
}

func (c *layerCounts) get(h v1.Hash) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[h]
}

// layerReader reads a layer tar within the limits. It is the one place that
// layer tars are read through: when a layer comes into the store and when
// fixLayer rewrites it for tar2ext4. It counts:
//
//   - the layer's bytes, as the larger of the tar stream's length and the
//     sum of its entries' declared sizes (512 a header, the data rounded up
//     to blocks): a sparse file counts at its logical size, which is what
//     archive/tar reads out of it (holes as zeros), and what tar2ext4 writes;
//   - each file's declared size, refused from its header, before its data;
//   - the entries, and the parent directories they imply, which tar2ext4
//     creates (one entry a/b/…/z can imply thousands).
//
// GNU sparse files (old GNU format, PAX 0.0, 0.1 and 1.0), which archive/tar
// expands and reports at their logical size, are counted so; sparse entries
// in any other format are refused, since they could not be counted right.
type layerReader struct {
	tr       *tar.Reader
	lim      Limits
	budget   *budget
	where    string // "image sha256:…: layer sha256:…"
	raw      int64  // bytes of the tar stream read
	declared int64  // the entries' declared bytes
	charged  int64  // max(raw, declared): what budget has of this layer
	entries  int64
	dirs     map[uint64]struct{} // hashes of the directories seen or implied
	seed     maphash.Seed
	err      error // the first limit error; every later call returns it
	under    io.Reader
}

func newLayerReader(r io.Reader, lim Limits, b *budget, where string) *layerReader {
	l := &layerReader{lim: lim.withDefaults(), budget: b, where: where, dirs: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
	l.under = rawCounter{l, r}
	l.tr = tar.NewReader(l.under)
	return l
}

// rawCounter counts the bytes of the tar stream.
type rawCounter struct {
	l *layerReader
	r io.Reader
}

func (c rawCounter) Read(p []byte) (int, error) {
	if c.l.err != nil {
		return 0, c.l.err
	}
	n, err := c.r.Read(p)
	c.l.raw += int64(n)
	if lerr := c.l.charge(); lerr != nil {
		return n, lerr
	}
	return n, err
}

// charge brings the layer's count up to date, and checks it and the image's.
func (l *layerReader) charge() error {
	cur := max(l.raw, l.declared)
	if cur <= l.charged {
		return nil
	}
	delta := cur - l.charged
	l.charged = cur
	if cur > l.lim.MaxLayerBytes {
		return l.fail(errdefs.Errorf(errdefs.ErrLimit, "%s: %d bytes uncompressed, limit %d", l.where, cur, l.lim.MaxLayerBytes))
	}
	if err := l.budget.add(l.where, delta); err != nil {
		return l.fail(err)
	}
	return nil
}

func (l *layerReader) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return l.err
}

// release takes the layer's bytes back from the image's count.
func (l *layerReader) release() {
	if l.budget != nil {
		l.budget.used.Add(-l.charged)
	}
	l.charged = 0
}

// Next is tar.Reader.Next within the limits.
func (l *layerReader) Next() (*tar.Header, error) {
	if l.err != nil {
		return nil, l.err
	}
	hdr, err := l.tr.Next()
	if l.err != nil {
		return nil, l.err
	}
	if err != nil {
		return nil, err
	}
	name := cleanPath(hdr.Name)
	if len(hdr.Name) > maxPathBytes || len(hdr.Linkname) > maxPathBytes {
		return nil, l.fail(errdefs.Errorf(errdefs.ErrLimit, "%s: entry %s: name or link target of %d bytes, limit %d",
			l.where, printable(truncate(name, 256)), max(len(hdr.Name), len(hdr.Linkname)), maxPathBytes))
	}
	l.entries++
	for p := path.Dir(name); p != "." && p != "/"; p = path.Dir(p) {
		h := maphash.String(l.seed, p)
		if _, ok := l.dirs[h]; ok {
			break
		}
		l.dirs[h] = struct{}{}
		l.entries++
	}
	if hdr.Typeflag == tar.TypeDir {
		l.dirs[maphash.String(l.seed, name)] = struct{}{}
	}
	if l.entries > l.lim.MaxEntries {
		return nil, l.fail(errdefs.Errorf(errdefs.ErrLimit, "%s: %d entries (with the directories they imply), limit %d", l.where, l.entries, l.lim.MaxEntries))
	}
	if err := checkSparse(hdr); err != nil {
		return nil, l.fail(fmt.Errorf("%s: %w", l.where, err))
	}
	size := dataSize(hdr)
	if size > l.lim.MaxFileBytes {
		return nil, l.fail(limitErr(l.where, "file "+printable(name), size, l.lim.MaxFileBytes))
	}
	l.declared = satAdd(l.declared, satAdd(512, (size+511)&^511))
	if err := l.charge(); err != nil {
		return nil, err
	}
	return hdr, nil
}

// Read reads the current entry's data.
func (l *layerReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.tr.Read(p)
	if l.err != nil {
		return n, l.err
	}
	return n, err
}

// Finish reads, counting, what follows the end of the tar: a layer's digest
// covers it, and it must not be unbounded either.
func (l *layerReader) Finish() error {
	if l.err != nil {
		return l.err
	}
	_, err := io.Copy(io.Discard, l.under)
	if l.err != nil {
		return l.err
	}
	return err
}

// walk reads the whole layer and returns its counted size.
func (l *layerReader) walk() (int64, error) {
	for {
		_, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if err := l.Finish(); err != nil {
		return 0, err
	}
	return l.charged, nil
}

// dataSize is the number of data bytes archive/tar reads for hdr: its
// logical size for a sparse file, none for types that have no data.
func dataSize(hdr *tar.Header) int64 {
	switch hdr.Typeflag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return 0
	}
	return hdr.Size
}

// checkSparse refuses PAX GNU sparse entries in a format archive/tar does not
// expand (it would read them as plain files of their stored size, with the map
// in the data): 0.0, 0.1 and 1.0 are expanded, and reported at their full size.
func checkSparse(hdr *tar.Header) error {
	rec := hdr.PAXRecords
	sparse := false
	for k := range rec {
		if strings.HasPrefix(k, "GNU.sparse.") {
			sparse = true
			break
		}
	}
	if !sparse {
		return nil
	}
	major, minor := rec["GNU.sparse.major"], rec["GNU.sparse.minor"]
	switch {
	case major == "0" && (minor == "0" || minor == "1"), major == "1" && minor == "0":
		return nil
	case major == "" && minor == "" && rec["GNU.sparse.map"] != "":
		return nil
	}
	return errdefs.Errorf(errdefs.ErrUnsupported, "file %s: GNU sparse format %q.%q", printable(cleanPath(hdr.Name)), major, minor)
}

// printable is s, quoted if it has characters that would garble a message.
func printable(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// walkLayer returns a check for writeBlob that reads the blob as a layer
// (gzip, zstd or plain, as Rootfs will) through the limits, charging b, and
// records its counted size in counts.
func walkLayer(lim Limits, b *budget, counts *layerCounts, desc v1.Descriptor) func(io.Reader) error {
	return func(r io.Reader) error {
		rc, err := uncompressed(io.NopCloser(r), desc)
		if err != nil {
			return fmt.Errorf("%s: layer %s: %w: %w", b.image, desc.Digest, err, errdefs.ErrInvalidArgument)
		}
		defer rc.Close()
		where := join(b.image, "layer "+desc.Digest.String())
		lr := newLayerReader(rc, lim, b, where)
		n, err := lr.walk()
		if lr.err != nil {
			return lr.err // names where already
		}
		if err != nil {
			return withKind(fmt.Errorf("%s: %w", where, err), errdefs.ErrInvalidArgument)
		}
		counts.set(desc.Digest, n)
		return nil
	}
}

// uncompressed is the layer blob rc uncompressed as go-containerregistry
// does it: gzip or zstd by the content's first bytes, else as it is.
func uncompressed(rc io.ReadCloser, desc v1.Descriptor) (io.ReadCloser, error) {
	l, err := partial.CompressedToLayer(streamLayer{rc: rc, desc: desc})
	if err != nil {
		return nil, err
	}
	return l.Uncompressed()
}

// streamLayer is a layer blob that can be read once.
type streamLayer struct {
	rc   io.ReadCloser
	desc v1.Descriptor
}

func (b streamLayer) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b streamLayer) Compressed() (io.ReadCloser, error)  { return b.rc, nil }
func (b streamLayer) Size() (int64, error)                { return b.desc.Size, nil }
func (b streamLayer) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
