package integration

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Snapshots of a running box, with and without its memory: a memory
// snapshot restored (twice) brings the box back paused at its instant: a
// shell's variable and the disk as they were, the box's hostname and
// machine id, a new boot id each time. A disk snapshot of the running box
// holds what was synced before it. A stopped box has no memory to keep; a
// paused one does.
func TestMemorySnapshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithName("memsnap"), boxlite.WithAutoRemove(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Remove(context.Background(), b.ID(), true) })
	ident := func() (host, machine, boot string) {
		f := strings.Fields(string(runIn(t, b, sh("hostname; cat /etc/machine-id 2>/dev/null || echo no-machine-id; cat /proc/sys/kernel/random/boot_id")).Stdout))
		if len(f) != 3 {
			t.Fatalf("identity: %q", f)
		}
		return f[0], f[1], f[2]
	}
	host0, machine0, boot0 := ident()
	runIn(t, b, sh("echo one > /root/f; sync"))
	shell, err := b.Exec(ctx, boxlite.Command{Argv: []string{"sh"}, Stdin: true, Detachable: true, ID: "snapshell"})
	if err != nil {
		t.Fatal(err)
	}
	if got := shellLine(t, shell, bufio.NewReader(shell.Stdout), "v=", "x=1; echo v=$x"); got != "v=1" {
		t.Fatalf("shell: %q", got)
	}
	mem, err := b.CreateSnapshotWith(ctx, "with-memory", boxlite.SnapshotOptions{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	if !mem.Memory || mem.MemoryBytes <= 0 || b.State() != boxlite.StateRunning {
		t.Fatalf("memory snapshot %+v; box %s", mem, b.State())
	}
	// A clone of it, the box running: a paused fork of that instant.
	clone, err := b.Clone(ctx, boxlite.CloneOptions{Name: "memsnap-clone", Snapshot: "with-memory"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clone.Remove(context.Background(), true) })
	if s := clone.State(); s != boxlite.StatePaused {
		t.Fatalf("a clone of a memory snapshot is %s, want paused", s)
	}
	csh, err := clone.AttachExec(ctx, "snapshell")
	if err != nil {
		t.Fatal(err)
	}
	if got := shellLine(t, csh, bufio.NewReader(csh.Stdout), "c=", "echo c=$x$(cat /root/f)$(hostname)"); got != "c=1onememsnap-clone" {
		t.Fatalf("the clone's shell says %q", got)
	}
	csh.Close()
	if f := strings.Fields(string(runIn(t, clone, sh("cat /proc/sys/kernel/random/boot_id")).Stdout)); len(f) != 1 || f[0] == boot0 {
		t.Fatalf("the clone's boot id %q (the source's %s)", f, boot0)
	}
	runIn(t, b, sh("echo two > /root/f")) // the snapshot syncs first
	disk, err := b.CreateSnapshot(ctx, "disk-only")
	if err != nil {
		t.Fatal(err)
	}
	if disk.Memory {
		t.Fatalf("disk snapshot says memory: %+v", disk)
	}
	// A clone and an export of the running box: its disk as it is now.
	live, err := b.Clone(ctx, boxlite.CloneOptions{Name: "memsnap-live"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Remove(context.Background(), true) })
	archive, err := b.Export(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	imported, err := rt.ImportBox(ctx, archive, "memsnap-imported")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imported.Remove(context.Background(), true) })
	for _, c := range []*boxlite.Box{live, imported} {
		if got := string(runIn(t, c, sh("cat /root/f")).Stdout); got != "two\n" {
			t.Fatalf("%s of the running box: /root/f is %q", c.Name(), got)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != boxlite.StateRunning {
		t.Fatalf("the box after a clone and an export: %s", b.State())
	}
	shell.Close()
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSnapshotWith(ctx, "stopped", boxlite.SnapshotOptions{Memory: true}); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("memory snapshot of a stopped box: %v, want ErrInvalidState", err)
	}
	if err := b.RestoreSnapshot(ctx, "disk-only"); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := string(runIn(t, b, sh("cat /root/f")).Stdout); got != "two\n" {
		t.Fatalf("disk snapshot of the running box: /root/f is %q", got)
	}
	var boots []string
	for round := 0; round < 2; round++ {
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.RestoreSnapshot(ctx, "with-memory"); err != nil {
			t.Fatal(err)
		}
		if s := b.State(); s != boxlite.StatePaused {
			t.Fatalf("round %d: after a memory restore the box is %s", round, s)
		}
		sh2, err := b.AttachExec(ctx, "snapshell") // resumes it
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := shellLine(t, sh2, bufio.NewReader(sh2.Stdout), "w=", "echo w=$x$(cat /root/f)"); got != "w=1one" {
			t.Fatalf("round %d: the restored shell says %q", round, got)
		}
		sh2.Close()
		host, machine, boot := ident()
		if host != host0 || machine != machine0 {
			t.Fatalf("round %d: hostname %q machine id %q, want the box's %q %q", round, host, machine, host0, machine0)
		}
		for _, prev := range append(boots, boot0) {
			if boot == prev {
				t.Fatalf("round %d: boot id %s seen before", round, boot)
			}
		}
		boots = append(boots, boot)
	}
	// A paused box keeps its memory in a snapshot too.
	if _, err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := b.CreateSnapshotWith(ctx, "paused", boxlite.SnapshotOptions{Memory: true})
	if err != nil || !p.Memory {
		t.Fatalf("memory snapshot of a paused box: %+v %v", p, err)
	}
	if err := b.RestoreSnapshot(ctx, "disk-only"); !errors.Is(err, errdefs.ErrInvalidState) {
		t.Fatalf("disk restore of a paused box: %v, want ErrInvalidState", err)
	}
	if err := b.RestoreSnapshot(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if got := string(runIn(t, b, sh("cat /root/f")).Stdout); got != "one\n" {
		t.Fatalf("after the paused snapshot's restore: %q", got)
	}
	all, err := b.Snapshots(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("snapshots: %+v %v", all, err)
	}
}
