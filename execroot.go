package boxlite

import (
	"context"
	"fmt"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// ReleaseRoot undoes what the box's agent mounted into a Command.Root for
// its commands (the box's /proc, /dev and /sys, the RootBinds), once no
// process runs there any more: a container's end (the containerd shim
// releases each container's root when containerd deletes it). A later
// command in that root readies it again; a root never used is no error, and
// neither is a box that is not running (its mounts ended with its VM).
// ErrUnsupported: the box runs an agent without process roots.
func (b *Box) ReleaseRoot(ctx context.Context, root string) error {
	what := fmt.Sprintf("release root %s", root)
	b.mu.Lock()
	c, state, info := b.conn, b.state, b.info
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		return nil
	}
	if !info.Hello.Has(protocol.FeatureExecRoot) {
		return errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s runs an agent without process roots (%s)", what, b.rec.ID, info.Hello.Agent)
	}
	s := newCopyStream(c, what)
	if _, err := c.open(s, protocol.TReleaseRoot, protocol.ReleaseRoot{Root: root}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return s.abandon(errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", what, ctx.Err()))
	}
}
