package boxlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
)

// Saves of a running box, at one instant: the shim stops the VM, saves
// what is asked into a directory of the box's made for this save
// (shimapi.SaveDirPrefix), and runs the VM on. Forks (fork.go) and
// snapshots of a running box (snapshot.go) are made from such a save.

// saveRunning has the box's shim save it (req: the disk alone, or its
// memory and devices too) into a new save directory, whose path it returns;
// the caller removes it.
func (b *Box) saveRunning(ctx context.Context, c *conn, op string, req protocol.ForkSave) (string, protocol.Paused, error) {
	var res protocol.Paused
	name := shimapi.SaveDirPrefix + newID()
	dir := b.path(name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", res, fmt.Errorf("%s: %w", op, err)
	}
	req.Into = name
	if err := c.requestWithin(ctx, protocol.TFork, req, &res, pauseTimeout); err != nil {
		os.RemoveAll(dir)
		return "", res, fmt.Errorf("%s: %w", op, err)
	}
	return dir, res, nil
}

// syncTimeout bounds the sync in a box before its disk is saved.
const syncTimeout = 30 * time.Second

// syncGuest has the running box write back what it holds for its disk
// (`sync`, where the image has it), so that a save of the disk holds what
// was written before it; without it, or if it hangs, the disk is as a power
// cut leaves it (ext4's journal keeps it whole).
func (b *Box) syncGuest(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	b.Run(sctx, Command{Argv: []string{"sync"}, Timeout: syncTimeout})
}

// diskNow gives op the box's disk as it is now: while the box runs, a copy
// saved at one instant (synced first); else the disk itself, under the disk
// lock (no VM starts meanwhile). release ends it.
func (b *Box) diskNow(ctx context.Context, op string) (path string, release func(), err error) {
	if b.refresh(); b.State() == StateRunning {
		c, _, err := b.running(ctx, op)
		if err != nil {
			return "", nil, err
		}
		b.syncGuest(ctx)
		save, _, err := b.saveRunning(ctx, c, op, protocol.ForkSave{DiskOnly: true})
		if err != nil {
			return "", nil, err
		}
		return filepath.Join(save, shimapi.ForkDiskFile), func() { os.RemoveAll(save) }, nil
	}
	unlock, err := b.lockDisk(op)
	if err != nil {
		return "", nil, err
	}
	return b.path(shimapi.DiskFile), unlock, nil
}

// linkOrCopy makes dst the file src: a hard link where it can (a saved
// state is only ever read: a resume removes its own name for it), else a
// sparse copy.
func linkOrCopy(ctx context.Context, src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return sparse.Copy(ctx, src, dst)
}
