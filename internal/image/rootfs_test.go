package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Microsoft/hcsshim/ext4/tar2ext4"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/boxlite/boxlite/errdefs"
)

// twoLayers is an image whose upper layer deletes, hides and adds files.
func twoLayers(t *testing.T) v1.Image {
	bottom := layerTar(t,
		entry{name: "etc/", typ: tar.TypeDir},
		entry{name: "etc/motd", body: "hello\n"},
		entry{name: "etc/keep", body: "keep\n"},
		entry{name: "opaque/", typ: tar.TypeDir},
		entry{name: "opaque/old", body: "old\n"},
		entry{name: "gone/", typ: tar.TypeDir},
		entry{name: "gone/file", body: "x"},
		entry{name: "big", body: strings.Repeat("0123456789abcdef", 64<<10)}, // 1 MiB
	)
	top := layerTar(t,
		entry{name: "etc/", typ: tar.TypeDir},
		entry{name: "etc/.wh.motd"},
		entry{name: "opaque/", typ: tar.TypeDir},
		entry{name: "opaque/.wh..wh..opq"},
		entry{name: "opaque/new", body: "new\n"},
		entry{name: ".wh.gone"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "bin/", typ: tar.TypeDir},
		entry{name: "bin/tool", body: "#!/bin/sh\n", mode: 0o755},
		entry{name: "bin/alias", typ: tar.TypeLink, link: "bin/tool"},
		entry{name: "bin/sh", typ: tar.TypeSymlink, link: "tool"},
	)
	return testImage(t, v1.Config{Cmd: []string{"/bin/sh"}}, bottom, top)
}

// loadImage loads img into s under ref and returns it.
func loadImage(t *testing.T, s *Store, ref string, img v1.Image) Image {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "img.tar")
	writeArchive(t, archive, map[string]v1.Image{ref: img})
	loaded, err := s.Load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	return loaded[0]
}

// haveTools says whether e2fsprogs' e2fsck and debugfs are there (apt-get install e2fsprogs).
func haveTools(t *testing.T) bool {
	t.Setenv("PATH", os.Getenv("PATH")+":/sbin:/usr/sbin")
	for _, tool := range []string{"e2fsck", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// fsck checks an ext4 image with e2fsck, which reports nothing but
// "Padding at end of inode bitmap is not set" on tar2ext4 output (a known quirk).
func fsck(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command("e2fsck", "-fn", path).CombinedOutput()
	if err == nil {
		return
	}
	ok := regexp.MustCompile(`^(|e2fsck .*|Pass \d: .*|Padding at end of inode bitmap is not set\. Fix\? no|.*WARNING: Filesystem still has errors.*|.*: \d+/\d+ files .*)$`)
	for _, line := range strings.Split(string(out), "\n") {
		if !ok.MatchString(line) {
			t.Errorf("e2fsck %s: %v:\n%s", path, err, out)
			return
		}
	}
}

func debugfs(t *testing.T, image, request string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", request, image).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs -R %q %s: %v\n%s", request, image, err, out)
	}
	return string(out)
}

func TestRootfs(t *testing.T) {
	if !haveTools(t) {
		t.Fatal("e2fsck and debugfs not found (make setup installs e2fsprogs)")
	}
	s, dir := openStore(t)
	img := loadImage(t, s, "two:layers", twoLayers(t))
	before := conversions.Load()
	paths, err := s.Rootfs(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || conversions.Load()-before != 2 {
		t.Fatalf("paths %v, %d conversions", paths, conversions.Load()-before)
	}
	for i, p := range paths {
		if want := filepath.Join(dir, "layers", strings.TrimPrefix(img.Layers[i].DiffID, "sha256:")+layerSuffix); p != want {
			t.Errorf("layer %d at %s, want %s", i, p, want)
		}
		fsck(t, p)
	}
	bottom, top := paths[0], paths[1]
	if got := debugfs(t, bottom, "cat /etc/motd"); !strings.Contains(got, "hello") {
		t.Errorf("bottom /etc/motd: %q", got)
	}
	// Whiteouts become overlayfs whiteouts: 0:0 character devices.
	for _, p := range []string{"/etc/motd", "/gone"} {
		st := debugfs(t, top, "stat "+p)
		if !strings.Contains(st, "Type: character special") || !strings.Contains(st, "Device major/minor number: 00:00") {
			t.Errorf("top %s is no whiteout:\n%s", p, st)
		}
	}
	if ls := debugfs(t, top, "ls /etc"); strings.Contains(ls, ".wh.") {
		t.Errorf("whiteout file left in /etc: %s", ls)
	}
	// An opaque directory gets trusted.overlay.opaque=y.
	if ea := debugfs(t, top, "ea_list /opaque"); !strings.Contains(ea, `trusted.overlay.opaque (1) = "y"`) {
		t.Errorf("top /opaque is not opaque: %s", ea)
	}
	if ls := debugfs(t, top, "ls /opaque"); strings.Contains(ls, ".wh.") || !strings.Contains(ls, "new") {
		t.Errorf("top /opaque: %s", ls)
	}
	if st := debugfs(t, top, "stat /tmp"); !strings.Contains(st, "Mode:  01777") {
		t.Errorf("top /tmp mode:\n%s", st)
	}
	if st := debugfs(t, top, "stat /bin/alias"); !strings.Contains(st, "Links: 2") {
		t.Errorf("top /bin/alias is no hard link:\n%s", st)
	}
	if st := debugfs(t, top, "stat /bin/sh"); !strings.Contains(st, "Type: symlink") || !strings.Contains(st, `Fast link dest: "tool"`) {
		t.Errorf("top /bin/sh:\n%s", st)
	}

	// Again: the cache answers, nothing is rewritten.
	st0, _ := os.Stat(top)
	again, err := s.Rootfs(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(top)
	if fmt.Sprint(again) != fmt.Sprint(paths) || !os.SameFile(st0, st1) || !st0.ModTime().Equal(st1.ModTime()) || conversions.Load()-before != 2 {
		t.Errorf("second call: %v, same file %v, %d conversions", again, os.SameFile(st0, st1), conversions.Load()-before)
	}
	// Another image with the same bottom layer shares its ext4 image.
	other := testImage(t, v1.Config{}, mustLayerTar(t, twoLayers(t), 0), layerTar(t, entry{name: "x", body: "x"}))
	otherPaths, err := s.Rootfs(context.Background(), loadImage(t, s, "other:1", other))
	if err != nil {
		t.Fatal(err)
	}
	if otherPaths[0] != bottom || conversions.Load()-before != 3 {
		t.Errorf("shared bottom layer: %v, %d conversions", otherPaths, conversions.Load()-before)
	}
}

// mustLayerTar returns the uncompressed tar of layer i of img.
func mustLayerTar(t *testing.T, img v1.Image, i int) []byte {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[i].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	b.ReadFrom(rc)
	return b.Bytes()
}

func TestRootfsConcurrent(t *testing.T) {
	s, dir := openStore(t)
	img := loadImage(t, s, "two:layers", twoLayers(t))
	before := conversions.Load()
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir) // a store of its own, as another process would have
			if err == nil {
				var paths []string
				paths, err = s.Rootfs(context.Background(), img)
				results[i] = fmt.Sprint(paths)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := conversions.Load() - before; n != 2 {
		t.Errorf("%d conversions, want 2", n)
	}
	for _, r := range results {
		if r != results[0] {
			t.Errorf("different paths: %v", results)
		}
	}
}

// TestRootfsProcesses runs Rootfs in several processes at once: each layer is converted once in all.
func TestRootfsProcesses(t *testing.T) {
	s, dir := openStore(t)
	img := loadImage(t, s, "two:layers", twoLayers(t))
	start := filepath.Join(t.TempDir(), "start")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "BOXLITE_IMAGE_HELPER="+dir+"|"+img.Digest+"|"+start)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	time.Sleep(50 * time.Millisecond) // let them all get to the start line
	os.WriteFile(start, nil, 0o644)
	total := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v\n%s", err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "conversions="); ok {
				k, _ := strconv.Atoi(n)
				total += k
			}
		}
	}
	if total != 2 {
		t.Errorf("%d conversions in all processes, want 2", total)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "layers", ".*")); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestHelperProcess(t *testing.T) {
	arg := os.Getenv("BOXLITE_IMAGE_HELPER")
	if arg == "" {
		t.Skip("helper for TestRootfsProcesses")
	}
	parts := strings.Split(arg, "|")
	s, err := Open(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Get(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(parts[2]); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Rootfs(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("conversions=%d\n", conversions.Load())
}

func TestRootfsFailureLeavesNothing(t *testing.T) {
	s, dir := openStore(t)
	img := loadImage(t, s, "two:layers", twoLayers(t))
	layersDir := filepath.Join(dir, "layers")

	// A cancelled conversion.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Rootfs(ctx, img); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := s.Rootfs(ctx, img); !errors.Is(err, errdefs.ErrTimeout) {
		t.Errorf("deadline: %v", err)
	}
	// A blob whose content does not match its DiffID.
	top := strings.TrimPrefix(img.Layers[1].DiffID, "sha256:")
	blob := filepath.Join(dir, "oci", "blobs", "sha256", top)
	os.Chmod(blob, 0o644)
	if err := os.WriteFile(blob, layerTar(t, entry{name: "evil", body: "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Rootfs(context.Background(), img)
	if !errors.Is(err, errdefs.ErrInternal) || !strings.Contains(err.Error(), "does not match the DiffID") {
		t.Errorf("corrupt blob: %v", err)
	}
	entries, _ := os.ReadDir(layersDir)
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			names = append(names, e.Name())
		}
	}
	if want := []string{strings.TrimPrefix(img.Layers[0].DiffID, "sha256:") + layerSuffix}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("layers/ holds %v, want %v", names, want)
	}

	if _, err := s.Rootfs(context.Background(), Image{Digest: "sha256:" + strings.Repeat("0", 64)}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing image: %v", err)
	}
}

func TestRootfsLayerOverMaximumDiskSize(t *testing.T) {
	// tar2ext4 fails past its metadata reserve (16 GiB by default); convert
	// retries with a bigger one. Try it with a 64 KiB reserve and a 1 MiB layer.
	defer func(old []tar2ext4.Option) { ext4Options = old }(ext4Options)
	ext4Options = append(ext4Options[:len(ext4Options):len(ext4Options)], tar2ext4.MaximumDiskSize(64<<10))
	s, _ := openStore(t)
	img := loadImage(t, s, "two:layers", twoLayers(t))
	paths, err := s.Rootfs(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if haveTools(t) {
		fsck(t, paths[0])
	}
}
