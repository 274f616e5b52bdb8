package boxlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/protocol"
)

// RootLimits are the limits of a Command.Root's cgroup in the box; each 0
// is none. MemoryMax is in bytes (memory.max); CPUQuota and CPUPeriod in
// microseconds (cpu.max: a quota needs a period of 1 ms to 1 s);
// CPUWeight is cpu.weight (1-10000; 0 is the default, 100); PidsMax is
// pids.max.
type RootLimits struct {
	MemoryMax           uint64
	CPUQuota, CPUPeriod uint64
	CPUWeight           uint64
	PidsMax             uint64
}

// SetRootLimits gives the process root root (a Command.Root, a directory
// of the box) a cgroup of its own named name (1-128 letters, digits, _ . -),
// made by the box's agent under /sys/fs/cgroup/boxlite/, with limits l.
// The root's processes started from then on run in it (those running
// already stay where they are); called again, it changes the limits of
// what runs there. ReleaseRoot kills what is left in it and removes it.
// ErrUnsupported: the box's kernel or agent has no cgroups; ErrNotFound: no
// such directory; ErrAlreadyExists: the name is another root's.
func (b *Box) SetRootLimits(ctx context.Context, root, name string, l RootLimits) error {
	what := fmt.Sprintf("limits of root %s", root)
	req := protocol.RootCgroup{Root: root, Name: name, MemoryMax: l.MemoryMax, CPUQuota: l.CPUQuota,
		CPUPeriod: l.CPUPeriod, CPUWeight: l.CPUWeight, PidsMax: l.PidsMax}
	if err := protocol.CheckRootCgroup(req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := b.cgroupConn(what)
	if err != nil {
		return err
	}
	s := newCopyStream(c, what)
	if _, err := c.open(s, protocol.TRootCgroup, req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.wait(ctx)
}

// cgroupConn is the running box's connection when its agent has cgroups.
func (b *Box) cgroupConn(what string) (*conn, error) {
	b.mu.Lock()
	c, state, info := b.conn, b.state, b.info
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "%s: box %s is not running", what, b.rec.ID)
	}
	if !info.Hello.Has(protocol.FeatureRootCgroup) {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "%s: box %s has no cgroups (its kernel or agent: %s)", what, b.rec.ID, info.Hello.Agent)
	}
	return c, nil
}

// RootOOMWatch is a watch of a root's cgroup for OOM kills (WatchRootOOM).
type RootOOMWatch struct {
	s    *copyStream
	done chan struct{}
}

// WatchRootOOM watches the cgroup of root (SetRootLimits made it) for OOM
// kills: fn is called, from one goroutine, with the cgroup's kill count
// each time it grows (and once at the start when it is not 0), until
// Close, the cgroup goes (ReleaseRoot) or the box ends. ctx bounds the
// start only.
func (b *Box) WatchRootOOM(ctx context.Context, root string, fn func(kills uint64)) (*RootOOMWatch, error) {
	what := fmt.Sprintf("OOM watch of root %s", root)
	c, err := b.cgroupConn(what)
	if err != nil {
		return nil, err
	}
	s := newCopyStream(c, what)
	s.recv = newWindow(func(n int) { c.send(protocol.TCredit, s.id, protocol.Credit{Fd: 1, Bytes: n}) })
	if _, err := c.open(s, protocol.TRootOOM, protocol.RootOOMRequest{Root: root}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	w := &RootOOMWatch{s: s, done: make(chan struct{})}
	first := make(chan error, 1)
	go func() {
		defer close(w.done)
		var rec [protocol.RootOOMRecord]byte
		var last uint64
		for n := 0; ; n++ {
			if _, err := io.ReadFull(s.recv, rec[:]); err != nil {
				if n == 0 {
					first <- err
				}
				return
			}
			kills := binary.BigEndian.Uint64(rec[:])
			if kills < last {
				s.abandon(errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the box's OOM kill count went down (%d after %d)", what, kills, last))
				return
			}
			if n == 0 {
				first <- nil
			}
			if kills > last {
				last = kills
				fn(kills)
			}
		}
	}()
	select {
	case err = <-first:
	case <-ctx.Done():
		err = errdefs.Errorf(errdefs.ErrTimeout, "%s: %v", what, ctx.Err())
	}
	if err != nil {
		w.Close()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errdefs.Errorf(errdefs.ErrNotFound, "%s: the cgroup went before the watch began", what)
		}
		return nil, err
	}
	return w, nil
}

// Close ends the watch; fn is not called after it returns.
func (w *RootOOMWatch) Close() error {
	w.s.abandon(errdefs.Errorf(errdefs.ErrClosed, "%s: closed", w.s.what))
	<-w.done
	return nil
}

// Done is closed once the watch has ended.
func (w *RootOOMWatch) Done() <-chan struct{} { return w.done }
