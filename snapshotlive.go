package boxlite

import (
	"context"
	"fmt"
	"os"

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

// linkOrCopy makes dst the file src: a hard link where it can (a saved
// state is only ever read: a resume removes its own name for it), else a
// sparse copy.
func linkOrCopy(ctx context.Context, src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return sparse.Copy(ctx, src, dst)
}
