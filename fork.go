package boxlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/internal/sparse"
)

// MaxForks bounds the count of one Fork.
const MaxForks = 64

// Fork makes count new boxes from the running box's current state, as E2B's
// fork: the source is stopped only while its state is saved (its memory,
// devices and writable disk, all at one instant), then runs on, its
// streams intact. Each fork resumes from that state as a machine of its
// own: its processes, memory, files and a detachable exec's or session's
// interpreter are the source's at that instant, but it gets the host's
// clock, fresh entropy (its kernel RNG reseeded), its own hostname (its
// name when that is a valid hostname, else "fork-" and 8 hex digits), its
// own network stack and published ports (host ports picked anew). The
// source's open streams are cancelled in each fork as if their clients had
// gone: a command attached at the fork ends there, a detachable one runs on
// and AttachExec with its id reaches it in each fork. names (at most
// count; the rest unnamed) name the forks; the forks have the source's
// config otherwise, and are running when Fork returns. A paused box is
// resumed first; a box in another state is ErrInvalidState; one with
// volumes ErrUnsupported. On failure no fork is left.
func (b *Box) Fork(ctx context.Context, count int, names []string) ([]*Box, error) {
	const op = "fork"
	if err := b.rt.checkOpen(op); err != nil {
		return nil, err
	}
	if count < 1 || count > MaxForks || len(names) > count {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "fork: count %d (1..%d) with %d names (at most count)", count, MaxForks, len(names))
	}
	cfgs := make([]BoxConfig, count)
	for i := range cfgs {
		c := b.config()
		c.Name = ""
		if i < len(names) {
			c.Name = names[i]
		}
		c.Hostname = "fork-" + newID()[:8]
		if c.Name != "" && protocol.ValidHostname(c.Name) {
			c.Hostname = c.Name
		}
		c.Ports = append([]Port(nil), c.Ports...)
		for j := range c.Ports {
			c.Ports[j].HostPort = 0 // the source holds its own
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		cfgs[i] = c
	}
	b.refresh()
	if s := b.State(); s != StateRunning && s != StatePaused {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "fork box %s: it is %s; a fork copies a running box (Clone copies a stopped one)", b.rec.ID, s)
	}
	c, _, err := b.running(ctx, op)
	if err != nil {
		return nil, err
	}
	save, _, err := b.saveRunning(ctx, c, op, protocol.ForkSave{})
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(save)
	var rec shimapi.Paused
	if err := readJSON(filepath.Join(save, shimapi.ForkRecordFile), &rec); err != nil || !rec.Fork {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "fork box %s: its shim's record: %v", b.rec.ID, err)
	}
	var forks []*Box
	fail := func(err error) ([]*Box, error) {
		for _, f := range forks {
			f.Remove(context.Background(), true)
		}
		return nil, fmt.Errorf("%s box %s: %w", op, b.rec.ID, err)
	}
	for _, cfg := range cfgs {
		stage, err := b.rt.newStage(op)
		if err != nil {
			return fail(err)
		}
		f, err := b.stageFork(ctx, save, stage, cfg, rec)
		os.RemoveAll(stage) // gone when adopted
		if err != nil {
			return fail(err)
		}
		forks = append(forks, f)
	}
	errs := make([]error, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return forks, nil
}

// stageFork puts a fork together in stage (the saved state linked, the
// disk copied, the record) and adopts it as a box.
func (b *Box) stageFork(ctx context.Context, save, stage string, cfg BoxConfig, rec shimapi.Paused) (*Box, error) {
	if err := linkOrCopy(ctx, filepath.Join(save, shimapi.ForkStateFile), filepath.Join(stage, shimapi.StateFile)); err != nil {
		return nil, err
	}
	if err := sparse.Copy(ctx, filepath.Join(save, shimapi.ForkDiskFile), filepath.Join(stage, shimapi.DiskFile)); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(stage, shimapi.PausedFile), rec); err != nil {
		return nil, err
	}
	if err := b.copySecrets(stage); err != nil {
		return nil, err
	}
	return b.rt.adopt(stage, cfg, b.rec.ImageDigest)
}
