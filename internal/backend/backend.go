// Package backend is a runtime, its boxes and their executions as the C
// ABI (capi) and the CLI (cmd/boxlite) use them, over either a local
// runtime (the root package boxlite) or a `boxlite serve` reached over its
// REST API (internal/restclient). The adapters are thin: each call is the
// underlying type's own; what one side cannot do it refuses with a typed
// error (errdefs.ErrUnsupported) naming it.
package backend

import (
	"context"
	"io"
	"syscall"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/image"
)

// Runtime is a place boxes live: this machine's runtime or a server's.
type Runtime interface {
	// Create registers a box; o is validated once, by the runtime (the
	// local one through convert.BoxOptions, the server by its own checks).
	Create(ctx context.Context, o abi.BoxOptions) (Box, error)
	Get(ctx context.Context, idOrName string) (Box, error)
	List(ctx context.Context) ([]boxlite.BoxInfo, error)
	ImageLoad(ctx context.Context, path string) ([]abi.ImageInfo, error)
	ImageList(ctx context.Context) ([]abi.ImageInfo, error)
	// ImagePull fetches ref into the runtime's store.
	ImagePull(ctx context.Context, ref string) (abi.ImageInfo, error)
	// ImageRemove drops the name ref from the store (a digest: the image
	// with all its names); boxes using the image keep working.
	ImageRemove(ctx context.Context, ref string) error
	Metrics(ctx context.Context) (abi.RuntimeMetrics, error)
	ImportBox(ctx context.Context, path, name string, opts []boxlite.BoxOption) (Box, error)
	// Remote reports a runtime on a server (whose host paths and images
	// are the server's, not this machine's).
	Remote() bool
	Close()
}

// Box is a box of a Runtime: the local box's methods, and Exec and Clone,
// which return the interfaces.
type Box interface {
	ID() string
	Info() boxlite.BoxInfo
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// Pause saves the running box with its memory and ends its processes;
	// Resume restores it (see boxlite.Box.Pause); a server's box through
	// its routes.
	Pause(ctx context.Context) (boxlite.PauseInfo, error)
	Resume(ctx context.Context) error
	Remove(ctx context.Context, force bool) error
	Run(ctx context.Context, cmd boxlite.Command) (*boxlite.ExecResult, error)
	CopyIn(ctx context.Context, hostSrc, boxDst string, opts boxlite.CopyOptions) error
	CopyOut(ctx context.Context, boxSrc, hostDst string, opts boxlite.CopyOptions) error
	Metrics(ctx context.Context) (boxlite.BoxMetrics, error)
	CreateSnapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error)
	CreateSnapshotWith(ctx context.Context, name string, opts boxlite.SnapshotOptions) (boxlite.SnapshotInfo, error)
	Snapshots(ctx context.Context) ([]boxlite.SnapshotInfo, error)
	Snapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error)
	RemoveSnapshot(ctx context.Context, name string) error
	RestoreSnapshot(ctx context.Context, name string) error
	Export(ctx context.Context, dest string) (string, error)
	NewPythonSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.Session, error)
	NewShellSession(ctx context.Context, opts boxlite.SessionOptions) (*boxlite.ShellSession, error)
	NewCodeContext(ctx context.Context, language string, opts boxlite.SessionOptions) (*boxlite.CodeContext, error)
	Exec(ctx context.Context, cmd boxlite.Command) (Execution, error)
	Clone(ctx context.Context, opts boxlite.CloneOptions) (Box, error)
	// Fork makes running boxes from the running box's state (see
	// boxlite.Box.Fork).
	Fork(ctx context.Context, count int, names []string) ([]Box, error)
	// DialTunnel and ForwardTunnel reach a TCP port on the box's loopback
	// (see boxlite.Box.DialTunnel); a server's box refuses them
	// (ErrUnsupported).
	DialTunnel(ctx context.Context, port int) (TunnelConn, error)
	// UpdateOutbound and UpdateInbound replace the box's network policy
	// (see boxlite.Box.UpdateOutbound); a server's box refuses them.
	UpdateOutbound(ctx context.Context, mode string, allowNet []string) error
	UpdateInbound(ctx context.Context, mode string, allowNet []string) error
	ForwardTunnel(ctx context.Context, port int, listen boxlite.SocketAddress) (Forwarder, error)
}

// TunnelConn is a byte stream to a port in a box, with half-close.
type TunnelConn interface {
	io.ReadWriteCloser
	CloseWrite() error
	// Err is why the stream ended (nil while open, or after a clean end).
	Err() error
}

// Forwarder carries connections to a host address to a port in a box.
type Forwarder interface {
	LocalAddr() boxlite.SocketAddress
	// Done is closed once it has stopped; Wait then says why.
	Done() <-chan struct{}
	Wait(ctx context.Context) error
	Close() error
}

// Execution is a process started in a Box.
type Execution interface {
	ID() string
	// Stdin is nil unless the command asked for stdin.
	Stdin() io.WriteCloser
	// Stdout and Stderr are the process's output, read concurrently (or
	// with ReadNonblock, not both).
	Stdout() io.Reader
	Stderr() io.Reader
	ReadNonblock(fd int, p []byte) (int, error)
	Pending(fd int) bool
	Notify(f func())
	Done() <-chan struct{}
	Wait(ctx context.Context) (boxlite.ExitStatus, error)
	Signal(sig syscall.Signal) error
	Resize(rows, cols int) error
	Close() error
}

// Local is rt as a Runtime.
func Local(rt *boxlite.Runtime) Runtime { return localRuntime{rt} }

type localRuntime struct{ rt *boxlite.Runtime }

func (r localRuntime) Create(ctx context.Context, o abi.BoxOptions) (Box, error) {
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

func (r localRuntime) Get(ctx context.Context, idOrName string) (Box, error) {
	b, err := r.rt.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return localBox{b}, nil
}

func (r localRuntime) List(ctx context.Context) ([]boxlite.BoxInfo, error) { return r.rt.List(ctx) }

func (r localRuntime) ImageLoad(ctx context.Context, path string) ([]abi.ImageInfo, error) {
	imgs, err := r.rt.Images().Load(ctx, path)
	return convert.Images(imgs), err
}

func (r localRuntime) ImageList(context.Context) ([]abi.ImageInfo, error) {
	imgs, err := r.rt.Images().List()
	return convert.Images(imgs), err
}

func (r localRuntime) ImagePull(ctx context.Context, ref string) (abi.ImageInfo, error) {
	res, err := r.rt.Pull(ctx, ref)
	if err != nil {
		return abi.ImageInfo{}, err
	}
	return convert.Images([]image.Image{res.Image})[0], nil
}

func (r localRuntime) ImageRemove(_ context.Context, ref string) error {
	return r.rt.Images().Remove(ref)
}

func (r localRuntime) Metrics(context.Context) (abi.RuntimeMetrics, error) {
	return r.rt.Metrics(), nil
}

func (r localRuntime) ImportBox(ctx context.Context, path, name string, opts []boxlite.BoxOption) (Box, error) {
	b, err := r.rt.ImportBox(ctx, path, name, opts...)
	if err != nil {
		return nil, err
	}
	return localBox{b}, nil
}

func (r localRuntime) Remote() bool { return false }
func (r localRuntime) Close()       { r.rt.Close() }

type localBox struct{ *boxlite.Box }

func (b localBox) Exec(ctx context.Context, cmd boxlite.Command) (Execution, error) {
	e, err := b.Box.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return localExec{e}, nil
}

func (b localBox) Clone(ctx context.Context, opts boxlite.CloneOptions) (Box, error) {
	c, err := b.Box.Clone(ctx, opts)
	if err != nil {
		return nil, err
	}
	return localBox{c}, nil
}

func (b localBox) Fork(ctx context.Context, count int, names []string) ([]Box, error) {
	fs, err := b.Box.Fork(ctx, count, names)
	if err != nil {
		return nil, err
	}
	out := make([]Box, len(fs))
	for i, f := range fs {
		out[i] = localBox{f}
	}
	return out, nil
}

func (b localBox) DialTunnel(ctx context.Context, port int) (TunnelConn, error) {
	t, err := b.Box.DialTunnel(ctx, port)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (b localBox) ForwardTunnel(ctx context.Context, port int, listen boxlite.SocketAddress) (Forwarder, error) {
	f, err := b.Box.ForwardTunnel(ctx, port, listen)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (b localBox) UpdateOutbound(ctx context.Context, mode string, allowNet []string) error {
	return b.Box.UpdateOutbound(ctx, mode, allowNet)
}

func (b localBox) UpdateInbound(ctx context.Context, mode string, allowNet []string) error {
	return b.Box.UpdateInbound(ctx, mode, allowNet)
}

// LocalBox is the local box behind b, or nil for a server's.
func LocalBox(b Box) *boxlite.Box {
	if l, ok := b.(localBox); ok {
		return l.Box
	}
	return nil
}

type localExec struct{ *boxlite.Execution }

func (e localExec) Stdin() io.WriteCloser { return e.Execution.Stdin }
func (e localExec) Stdout() io.Reader     { return e.Execution.Stdout }
func (e localExec) Stderr() io.Reader     { return e.Execution.Stderr }
