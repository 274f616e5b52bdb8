package boxlite

import (
	"context"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// An auto-remove box (WithAutoRemove, the default) is removed when it stops:
// by Stop, by its shim when its creator died or it is detached, and, when its
// run ended on its own while its creator lives (its VM crashed or powered
// off, a protocol violation), by its creator here, once its shim has exited.

// autoRemove removes an auto-remove box whose run ended on its own (its VM
// crashed or powered off, the shim caught a protocol violation) once its
// shim has exited, keeping why for the calls that follow.
func (b *Box) autoRemove(shimCh chan struct{}, done chan struct{}, why string) {
	defer close(done)
	if shimCh != nil {
		select {
		case <-shimCh:
		case <-time.After(15 * time.Second): // Remove ends it
		}
	}
	if why == "" {
		why = "it stopped"
	}
	b.mu.Lock()
	b.removedWhy = why
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.remove(ctx, true); err != nil {
		b.mu.Lock()
		b.removedWhy = ""
		b.mu.Unlock()
	}
}

// awaitRemoval waits for an auto removal under way (autoRemove) to end.
func (b *Box) awaitRemoval(ctx context.Context) error {
	return b.await(ctx, func() chan struct{} { return b.removing }, "its auto removal")
}

// removedError says that the box is removed, and why when its run ended on
// its own (auto_remove).
func (b *Box) removedError(op string) error {
	b.mu.Lock()
	why := b.removedWhy
	b.mu.Unlock()
	if why != "" {
		return errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s was removed (auto_remove) when its run ended: %s", op, b.rec.ID, why)
	}
	return errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is removed", op, b.rec.ID)
}
