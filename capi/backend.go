package main

import (
	"context"
	"io"
	"syscall"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/restclient"
)

// The C calls run over these: a local runtime (boxlite.Runtime and its
// boxes and executions) and a REST one (restclient) satisfy them through
// the thin adapters below, so every call works on either.

// runtimeAPI is what the C calls need of a runtime.
type runtimeAPI interface {
	create(ctx context.Context, o abi.BoxOptions) (boxAPI, error)
	get(ctx context.Context, idOrName string) (boxAPI, error)
	list(ctx context.Context) ([]abi.BoxInfo, error)
	imageLoad(ctx context.Context, path string) ([]abi.ImageInfo, error)
	imageList(ctx context.Context) ([]abi.ImageInfo, error)
	metrics(ctx context.Context) (abi.RuntimeMetrics, error)
	importBox(ctx context.Context, path, name string, opts []boxlite.BoxOption) (boxAPI, error)
	close()
}

// boxAPI is what the C calls need of a box: the local box's methods, and
// exec and clone, which return the interfaces.
type boxAPI interface {
	ID() string
	Info() boxlite.BoxInfo
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Remove(ctx context.Context, force bool) error
	Run(ctx context.Context, cmd boxlite.Command) (*boxlite.ExecResult, error)
	CopyIn(ctx context.Context, hostSrc, boxDst string, opts boxlite.CopyOptions) error
	CopyOut(ctx context.Context, boxSrc, hostDst string, opts boxlite.CopyOptions) error
	Metrics(ctx context.Context) (boxlite.BoxMetrics, error)
	CreateSnapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error)
	Snapshots(ctx context.Context) ([]boxlite.SnapshotInfo, error)
	Snapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error)
	RemoveSnapshot(ctx context.Context, name string) error
	RestoreSnapshot(ctx context.Context, name string) error
	Export(ctx context.Context, dest string) (string, error)
	NewPythonSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.Session, error)
	NewShellSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.ShellSession, error)
	exec(ctx context.Context, cmd boxlite.Command) (execAPI, error)
	clone(ctx context.Context, opts boxlite.CloneOptions) (boxAPI, error)
}

// execAPI is what the C calls need of an execution.
type execAPI interface {
	ID() string
	stdin() io.WriteCloser // nil unless the command asked for stdin
	ReadNonblock(fd int, p []byte) (int, error)
	Pending(fd int) bool
	Notify(f func())
	Done() <-chan struct{}
	Wait(ctx context.Context) (boxlite.ExitStatus, error)
	Signal(sig syscall.Signal) error
	Resize(rows, cols int) error
	Close() error
}

// ---- local ----

type localRuntime struct{ rt *boxlite.Runtime }

func (r localRuntime) create(ctx context.Context, o abi.BoxOptions) (boxAPI, error) {
	opts, err := convert.BoxOptions(o)
	if err != nil {
		return nil, err
	}
	b, err := r.rt.Create(ctx, o.Image, opts...)
	if err != nil {
		return nil, err
	}
	return localBox{b}, nil
}

func (r localRuntime) get(ctx context.Context, idOrName string) (boxAPI, error) {
	b, err := r.rt.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return localBox{b}, nil
}

func (r localRuntime) list(ctx context.Context) ([]abi.BoxInfo, error) {
	infos, err := r.rt.List(ctx)
	return convert.BoxInfos(infos), err
}

func (r localRuntime) imageLoad(ctx context.Context, path string) ([]abi.ImageInfo, error) {
	imgs, err := r.rt.Images().Load(ctx, path)
	return convert.Images(imgs), err
}

func (r localRuntime) imageList(context.Context) ([]abi.ImageInfo, error) {
	imgs, err := r.rt.Images().List()
	return convert.Images(imgs), err
}

func (r localRuntime) metrics(context.Context) (abi.RuntimeMetrics, error) {
	return r.rt.Metrics(), nil
}

func (r localRuntime) importBox(ctx context.Context, path, name string, opts []boxlite.BoxOption) (boxAPI, error) {
	b, err := r.rt.ImportBox(ctx, path, name, opts...)
	if err != nil {
		return nil, err
	}
	return localBox{b}, nil
}

func (r localRuntime) close() { r.rt.Close() }

type localBox struct{ *boxlite.Box }

func (b localBox) exec(ctx context.Context, cmd boxlite.Command) (execAPI, error) {
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return localExec{e}, nil
}

func (b localBox) clone(ctx context.Context, opts boxlite.CloneOptions) (boxAPI, error) {
	c, err := b.Clone(ctx, opts)
	if err != nil {
		return nil, err
	}
	return localBox{c}, nil
}

type localExec struct{ *boxlite.Execution }

func (e localExec) stdin() io.WriteCloser { return e.Stdin }

// ---- REST ----

type restRuntime struct{ c *restclient.Client }

func (r restRuntime) create(ctx context.Context, o abi.BoxOptions) (boxAPI, error) {
	b, err := r.c.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return restBox{b}, nil
}

func (r restRuntime) get(ctx context.Context, idOrName string) (boxAPI, error) {
	b, err := r.c.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return restBox{b}, nil
}

func (r restRuntime) list(ctx context.Context) ([]abi.BoxInfo, error) {
	infos, err := r.c.List(ctx)
	return convert.BoxInfos(infos), err
}

func (r restRuntime) imageLoad(context.Context, string) ([]abi.ImageInfo, error) {
	return nil, errdefs.Errorf(errdefs.ErrUnsupported, "image load from a local file on a REST runtime (load it on the server: boxlite image load)")
}

func (r restRuntime) imageList(ctx context.Context) ([]abi.ImageInfo, error) { return r.c.Images(ctx) }

func (r restRuntime) metrics(ctx context.Context) (abi.RuntimeMetrics, error) {
	return r.c.Metrics(ctx)
}

func (r restRuntime) importBox(context.Context, string, string, []boxlite.BoxOption) (boxAPI, error) {
	return nil, errdefs.Errorf(errdefs.ErrUnsupported, "import of a box from a local archive on a REST runtime")
}

func (r restRuntime) close() { r.c.Close() }

type restBox struct{ *restclient.Box }

func (b restBox) exec(ctx context.Context, cmd boxlite.Command) (execAPI, error) {
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return restExec{e}, nil
}

func (b restBox) clone(ctx context.Context, opts boxlite.CloneOptions) (boxAPI, error) {
	c, err := b.Clone(ctx, opts)
	if err != nil {
		return nil, err
	}
	return restBox{c}, nil
}

type restExec struct{ *restclient.Execution }

func (e restExec) stdin() io.WriteCloser { return e.Stdin }
