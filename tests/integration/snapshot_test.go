package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

// TestSnapshotCloneExportImport: a file written before a snapshot is back
// after a restore; a clone and an export imported into a fresh home (no
// image there) see it too, booted. Snapshots, clone and export go through
// the CLI. Four boots, three of them at once.
func TestSnapshotCloneExportImport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := rt.Create(ctx, "alpine:latest", boxlite.WithName("snap-src"), boxlite.WithMemoryMiB(256), boxlite.WithAutoRemove(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Remove(context.Background(), true) })
	runIn(t, src, sh("echo one > /root/f.txt; sync"))

	// A running box is saved at one instant, with its memory if asked.
	if out, stderr, code := cli(t, "snapshot", "create", "--memory", "snap-src", "live"); code != 0 || !strings.HasPrefix(out, "live\t") {
		t.Fatalf("snapshot of a running box: exit %d, %q %s", code, out, stderr)
	}
	if out, _, code := cli(t, "snapshot", "ls", "snap-src"); code != 0 || !strings.Contains(out, "MEMORY") || !strings.Contains(out, " MB\n") {
		t.Fatalf("snapshot ls: exit %d, %q", code, out)
	}
	if _, stderr, code := cli(t, "snapshot", "rm", "snap-src", "live"); code != 0 {
		t.Fatalf("snapshot rm: exit %d, %s", code, stderr)
	}
	must(t, src.Stop(ctx))
	if out, stderr, code := cli(t, "snapshot", "create", "snap-src", "one"); code != 0 || !strings.HasPrefix(out, "one\t") {
		t.Fatalf("snapshot create: exit %d, %q %s", code, out, stderr)
	}
	si, err := src.Snapshot(ctx, "one")
	must(t, err)
	// The disk is 4 GB, sparse; the snapshot costs what the box wrote.
	if si.ContainerDiskBytes != 4<<30 || si.SizeBytes > 256<<20 {
		t.Fatalf("snapshot of a 4 GiB disk: %+v (not sparse?)", si)
	}
	t.Logf("snapshot: %d MB of a %d GB disk", si.SizeBytes>>20, si.ContainerDiskBytes>>30)
	if out, _, code := cli(t, "snapshot", "ls", "snap-src"); code != 0 || !strings.Contains(out, "\none ") {
		t.Fatalf("snapshot ls: exit %d, %q", code, out)
	}

	must(t, src.Start(ctx))
	runIn(t, src, sh("echo two > /root/f.txt"))
	must(t, src.Stop(ctx))
	if _, stderr, code := cli(t, "snapshot", "restore", "snap-src", "one"); code != 0 {
		t.Fatalf("snapshot restore: exit %d, %s", code, stderr)
	}
	out, stderr, code := cli(t, "clone", "snap-src", "--name", "snap-clone")
	if code != 0 {
		t.Fatalf("clone: exit %d, %s", code, stderr)
	}
	clone, err := rt.Get(ctx, strings.TrimSpace(out))
	must(t, err)
	t.Cleanup(func() { clone.Remove(context.Background(), true) })
	if clone.Name() != "snap-clone" || clone.State() != boxlite.StateStopped {
		t.Fatalf("clone %q is %s", clone.Name(), clone.State())
	}

	archive := filepath.Join(t.TempDir(), "src.boxlite")
	if out, stderr, code := cli(t, "export", "snap-src", archive); code != 0 || strings.TrimSpace(out) != archive {
		t.Fatalf("export: exit %d, %q %s", code, out, stderr)
	}
	fi, err := os.Stat(archive)
	must(t, err)
	img, _ := rt.Images().Get("alpine:latest")
	if fi.Size() > img.Size+64<<20 {
		t.Fatalf("the archive of a 4 GiB sparse disk is %d bytes (image %d): the disk was not written sparse", fi.Size(), img.Size)
	}
	t.Logf("archive: %.1f MB (image %.1f MB)", float64(fi.Size())/1e6, float64(img.Size)/1e6)

	home2 := t.TempDir()
	rt2, err := boxlite.NewRuntime(boxlite.WithHome(home2))
	must(t, err)
	defer rt2.Close()
	if imgs, _ := rt2.Images().List(); len(imgs) != 0 {
		t.Fatal("the second home has images before the import")
	}
	imported, err := rt2.ImportBox(ctx, archive, "moved")
	must(t, err)
	defer imported.Remove(context.Background(), true)

	// Boot the three at once: each must see the file as it was at the snapshot.
	var wg sync.WaitGroup
	for _, b := range []*boxlite.Box{src, clone, imported} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Start(ctx); err != nil {
				t.Errorf("start %s: %v", b.Name(), err)
				return
			}
			res, err := b.Run(ctx, boxlite.Command{Argv: []string{"cat", "/root/f.txt"}})
			if err != nil {
				t.Errorf("%s: %v", b.Name(), err)
			} else if string(res.Stdout) != "one\n" {
				t.Errorf("%s: /root/f.txt is %q, want \"one\\n\"", b.Name(), res.Stdout)
			}
		}()
	}
	wg.Wait()
}
