package boxlite

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/klauspost/compress/zstd"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// These tests need no VM: a box that was never started is a record and,
// here, a disk file written by the test.

func testRuntime(t *testing.T) *Runtime {
	t.Helper()
	r, err := NewRuntime(WithHome(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// testBox registers a box (not started) on a random image, with a sparse
// 1 GiB disk holding data at a few offsets.
func testBox(t *testing.T, r *Runtime) *Box {
	t.Helper()
	dir, _ := randomLayout(t, 2)
	imgs, err := r.Images().Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultBoxConfig(imgs[0].Digest)
	cfg.DiskSizeGB = 1
	b, err := r.register(cfg, imgs[0].Digest, "")
	if err != nil {
		t.Fatal(err)
	}
	writeDisk(t, b.path(shimapi.DiskFile), "v1")
	return b
}

// randomLayout writes an OCI layout of a random image of layers layers
// and returns its directory and the image's digest.
func randomLayout(t *testing.T, layers int64) (dir, digest string) {
	t.Helper()
	img, err := random.Image(4096, layers)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	p, err := layout.Write(dir, emptyIndex())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return dir, d.String()
}

// writeDisk makes a sparse 1 GiB file with tag at 0, 100 MiB and 900 MiB.
func writeDisk(t *testing.T, path, tag string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(1 << 30)
	for _, off := range []int64{0, 100 << 20, 900 << 20} {
		if _, err := f.WriteAt(bytes.Repeat([]byte(tag), 32<<10), off); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	a, _ := diskSizes(path)
	return a
}

func TestSnapshotsOfAStoppedBox(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	b := testBox(t, r)
	disk := b.path(shimapi.DiskFile)
	v1 := fileSum(t, disk)

	si, err := b.CreateSnapshot(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	if si.Name != "before" || si.BoxID != b.ID() || si.ContainerDiskBytes != 1<<30 || si.SizeBytes <= 0 || si.SizeBytes > 4<<20 {
		t.Fatalf("snapshot info %+v (a 1 GiB disk with 96 KiB of data should take well under 4 MiB)", si)
	}
	if _, err := b.CreateSnapshot(ctx, "before"); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("same name again: %v", err)
	}
	for _, bad := range []string{"../x", ".hidden", "a/b", strings.Repeat("x", 65)} {
		if _, err := b.CreateSnapshot(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "snapshot name") {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	auto, err := b.CreateSnapshot(ctx, "")
	if err != nil || auto.Name != auto.ID {
		t.Fatalf("unnamed snapshot: %+v %v", auto, err)
	}

	writeDisk(t, disk, "v2")
	if fileSum(t, disk) == v1 {
		t.Fatal("the disk did not change")
	}
	if err := b.RestoreSnapshot(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, disk) != v1 {
		t.Fatal("restore did not bring the disk back")
	}
	if a := allocated(t, disk); a > 4<<20 {
		t.Fatalf("restored disk takes %d bytes: not sparse", a)
	}

	list, err := b.Snapshots(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if got, err := b.Snapshot(ctx, "before"); err != nil || got != si {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := b.RemoveSnapshot(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, "before"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("get after remove: %v", err)
	}
	if err := b.RestoreSnapshot(ctx, "before"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("restore after remove: %v", err)
	}

	// A box whose disk does not exist yet (never booted): its snapshot is
	// empty, and restoring it removes the disk (the next start makes one).
	os.Remove(disk)
	empty, err := b.CreateSnapshot(ctx, "empty")
	if err != nil || empty.ContainerDiskBytes != 0 {
		t.Fatalf("snapshot of no disk: %+v %v", empty, err)
	}
	writeDisk(t, disk, "v3")
	if err := b.RestoreSnapshot(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(disk); !os.IsNotExist(err) {
		t.Fatalf("disk after restoring an empty snapshot: %v", err)
	}

	// Snapshots go with the box.
	if err := b.Remove(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Fatalf("box directory after remove: %v", err)
	}
}

func TestCloneOfAStoppedBox(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	b := testBox(t, r)
	if _, err := b.CreateSnapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	v1 := fileSum(t, b.path(shimapi.DiskFile))
	writeDisk(t, b.path(shimapi.DiskFile), "v2")

	c, err := b.Clone(ctx, CloneOptions{Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() == b.ID() || c.Name() != "copy" || c.State() != StateStopped || c.rec.ImageDigest != b.rec.ImageDigest {
		t.Fatalf("clone %s %q %s", c.ID(), c.Name(), c.State())
	}
	if fileSum(t, c.path(shimapi.DiskFile)) != fileSum(t, b.path(shimapi.DiskFile)) {
		t.Fatal("the clone's disk differs")
	}
	if _, err := b.Clone(ctx, CloneOptions{Name: "copy"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("clone with a taken name: %v", err)
	}
	fromSnap, err := b.Clone(ctx, CloneOptions{Snapshot: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if fileSum(t, fromSnap.path(shimapi.DiskFile)) != v1 {
		t.Fatal("the clone of a snapshot is not the snapshot")
	}
	if got, _ := r.Get(ctx, "copy"); got != c {
		t.Fatal("the clone is not found by name")
	}
	assertNoStages(t, r)
}

// assertNoStages fails if a stage directory was left in the home.
func assertNoStages(t *testing.T, r *Runtime) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(r.Home(), "boxes"))
	for _, e := range ents {
		if !validID(e.Name()) {
			t.Errorf("left in boxes/: %s", e.Name())
		}
	}
}

func TestExportImport(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	b := testBox(t, r)
	out := filepath.Join(t.TempDir(), "box.boxlite")
	path, err := b.Export(ctx, out)
	if err != nil || path != out {
		t.Fatalf("export: %q %v", path, err)
	}
	fi, _ := os.Stat(out)
	if fi.Size() > 1<<20 {
		t.Fatalf("archive of a 1 GiB disk with 96 KiB of data is %d bytes: not sparse", fi.Size())
	}
	if p, err := b.Export(ctx, filepath.Dir(out)); err != nil || p != filepath.Join(filepath.Dir(out), b.ID()+".boxlite") {
		t.Fatalf("export to a directory: %q %v", p, err)
	}

	if _, err := b.Export(ctx, "/nonexistent/dir/box.boxlite"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Fatalf("export into a missing directory: %v", err)
	}

	r2 := testRuntime(t) // another home, without the image
	if imgs, _ := r2.Images().List(); len(imgs) != 0 {
		t.Fatal("the second home has images")
	}
	c, err := r2.ImportBox(ctx, out, "imported")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "imported" || c.rec.ImageDigest != b.rec.ImageDigest || c.State() != StateStopped {
		t.Fatalf("imported %q %s %s", c.Name(), c.rec.ImageDigest, c.State())
	}
	if fileSum(t, c.path(shimapi.DiskFile)) != fileSum(t, b.path(shimapi.DiskFile)) {
		t.Fatal("the imported disk differs")
	}
	if a := allocated(t, c.path(shimapi.DiskFile)); a > 4<<20 {
		t.Fatalf("imported disk takes %d bytes: not sparse", a)
	}
	if _, err := r2.Images().Get(b.rec.ImageDigest); err != nil {
		t.Fatalf("image not imported: %v", err)
	}
	if _, err := r2.ImportBox(ctx, out, "imported"); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("import under a taken name: %v", err)
	}
	assertNoStages(t, r2)
}

// entry is one entry of a hand-made archive.
type entry struct {
	name string
	typ  byte
	data []byte
}

// readArchive returns the entries of a box archive.
func readArchive(t *testing.T, path string) []entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, _ := zstd.NewReader(f)
	defer zr.Close()
	tr := tar.NewReader(zr)
	var out []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out = append(out, entry{h.Name, h.Typeflag, data})
	}
}

func writeArchiveFile(t *testing.T, ents []entry) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hostile.boxlite")
	f, _ := os.Create(path)
	zw, _ := zstd.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o600, Size: int64(len(e.data))}
		if typ != tar.TypeReg {
			hdr.Size, hdr.Linkname = 0, "/etc/passwd"
		}
		tw.WriteHeader(hdr)
		tw.Write(e.data)
	}
	tw.Close()
	zw.Close()
	f.Close()
	return path
}

// withManifest returns ents with the manifest changed by edit.
func withManifest(t *testing.T, ents []entry, edit func(m map[string]any)) []entry {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ents[0].data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out := append([]entry{}, ents...)
	out[0].data, _ = json.Marshal(m)
	return out
}

// exportedBox is the archive of a new test box of r.
func exportedBox(t *testing.T, r *Runtime) string {
	t.Helper()
	good, err := testBox(t, r).Export(context.Background(), filepath.Join(t.TempDir(), "good.boxlite"))
	if err != nil {
		t.Fatal(err)
	}
	return good
}

func TestImportRefusesHostileArchives(t *testing.T) {
	ctx := context.Background()
	r := testRuntime(t)
	good := exportedBox(t, r)
	ents := readArchive(t, good)
	if ents[0].name != manifestEntry || ents[1].name != diskEntry {
		t.Fatalf("archive layout: %s, %s", ents[0].name, ents[1].name)
	}
	blob := -1
	for i, e := range ents {
		if isBlobEntry(e.name) && len(e.data) > 1000 {
			blob = i // a layer
		}
	}
	flip := func(i int) []entry {
		out := append([]entry{}, ents...)
		d := append([]byte{}, out[i].data...)
		d[len(d)/2] ^= 0xff
		out[i].data = d
		return out
	}
	type hostile struct {
		name string
		ents []entry
		kind error
		says string
	}
	cases := []hostile{
		{"path traversal", append(append([]entry{}, ents...), entry{name: "../../evil", data: []byte("x")}), errdefs.ErrInvalidArgument, `"../../evil"`},
		{"blob path traversal", append(append([]entry{}, ents...), entry{name: "image/blobs/sha256/../../../../x", data: []byte("x")}), errdefs.ErrInvalidArgument, "not part of a box archive"},
		{"absolute path", append(append([]entry{}, ents...), entry{name: "/tmp/evil", data: []byte("x")}), errdefs.ErrInvalidArgument, `"/tmp/evil"`},
		{"symlink", append(append([]entry{}, ents...), entry{name: "image/blobs/sha256/" + strings.Repeat("a", 64), typ: tar.TypeSymlink}), errdefs.ErrInvalidArgument, "not a regular file"},
		{"manifest not first", append([]entry{ents[1]}, ents...), errdefs.ErrInvalidArgument, "first entry"},
		{"duplicate entry", append(append([]entry{}, ents...), ents[2]), errdefs.ErrInvalidArgument, "twice"},
		{"bad disk digest", flip(1), errdefs.ErrInvalidArgument, "sha256"},
		{"bad blob", flip(blob), errdefs.ErrInvalidArgument, "layer sha256:"},
		// Over the importer's disk size (the default 4 GB), whatever the archive's config says.
		{"oversize disk", withManifest(t, ents, func(m map[string]any) {
			m["disk"].(map[string]any)["size"] = 8 << 30
			m["config"].(map[string]any)["disk_size_gb"] = 1024
		}), errdefs.ErrLimit, "over"},
		{"oversize manifest", append([]entry{{name: manifestEntry, data: bytes.Repeat([]byte(" "), maxManifestBytes+1)}}, ents[1:]...), errdefs.ErrLimit, manifestEntry},
		{"extent past the disk", withManifest(t, ents, func(m map[string]any) {
			m["disk"].(map[string]any)["extents"] = []map[string]int64{{"off": 1 << 30, "len": 1}}
		}), errdefs.ErrInvalidArgument, "extent"},
		{"bad config", withManifest(t, ents, func(m map[string]any) { m["config"].(map[string]any)["env"] = map[string]string{"A=B": "x"} }), errdefs.ErrInvalidArgument, "env key"},
		{"image name with escapes", withManifest(t, ents, func(m map[string]any) { m["config"].(map[string]any)["image"] = "\x1b]0;pwned\x07alpine" }), errdefs.ErrInvalidArgument, `image reference "\x1b]0;pwned\aalpine"`},
		{"image name that is no reference", withManifest(t, ents, func(m map[string]any) { m["config"].(map[string]any)["image"] = "Alpine::latest" }), errdefs.ErrInvalidArgument, "image reference"},
		{"user with escapes", withManifest(t, ents, func(m map[string]any) { m["config"].(map[string]any)["user"] = "root\x1b[2J" }), errdefs.ErrInvalidArgument, "control character"},
		{"named image", withIndex(t, ents, `"annotations":{"org.opencontainers.image.ref.name":"docker.io/library/alpine:latest"},`), errdefs.ErrInvalidArgument, "annotations"},
		{"volumes", withManifest(t, ents, func(m map[string]any) {
			m["config"].(map[string]any)["volumes"] = []map[string]any{{"host_path": "/", "guest_path": "/host"}}
		}), errdefs.ErrInvalidArgument, "volumes"},
		{"unknown field", withManifest(t, ents, func(m map[string]any) { m["run_on_host"] = true }), errdefs.ErrInvalidArgument, "run_on_host"},
		{"wrong image", withManifest(t, ents, func(m map[string]any) { m["image_digest"] = "sha256:" + strings.Repeat("0", 64) }), errdefs.ErrInvalidArgument, "image"},
		{"no image", ents[:2], errdefs.ErrInvalidArgument, "missing"},
	}
	r = testRuntime(t) // import into a home without the image, as on another machine
	before, _ := r.List(ctx)
	imgsBefore, _ := r.Images().List()
	for _, c := range cases {
		path := writeArchiveFile(t, c.ents)
		_, err := r.ImportBox(ctx, path, "")
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want %v saying %q", c.name, err, c.kind, c.says)
		}
	}
	if _, err := r.ImportBox(ctx, "/nonexistent.boxlite", ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing archive: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.Home()), "evil")); err == nil {
		t.Error("path traversal wrote a file")
	}
	after, _ := r.List(ctx)
	imgsAfter, _ := r.Images().List()
	if len(after) != len(before) || len(imgsAfter) != len(imgsBefore) {
		t.Errorf("failed imports left boxes (%d -> %d) or images (%d -> %d)", len(before), len(after), len(imgsBefore), len(imgsAfter))
	}
	assertNoStages(t, r)
}

// withIndex returns ents with insert put into the image's index.json entry
// for its manifest (after its opening brace).
func withIndex(t *testing.T, ents []entry, insert string) []entry {
	t.Helper()
	out := append([]entry{}, ents...)
	for i, e := range out {
		if e.name == imagePrefix+"index.json" {
			d := string(e.data)
			at := strings.Index(d, `"manifests":[{`) + len(`"manifests":[{`)
			if at < len(`"manifests":[{`) {
				t.Fatalf("index.json: %s", d)
			}
			out[i].data = []byte(d[:at] + insert + d[at:])
			return out
		}
	}
	t.Fatal("no index.json")
	return nil
}

func emptyIndex() v1.ImageIndex { return empty.Index }
