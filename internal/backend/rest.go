package backend

import (
	"context"
	"io"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
	"github.com/boxlite/boxlite/internal/restclient"
)

// REST is a runtime on the server o names; it does not call the server.
func REST(o abi.RestOptions) (Runtime, error) {
	c, err := restclient.New(o)
	if err != nil {
		return nil, err
	}
	return restRuntime{c}, nil
}

// Me is the key a REST runtime calls with, as the server names it
// (GET /v1/me); one authenticated call, so a refused key is
// refused (errdefs.ErrInvalidArgument, the server's 401). A local runtime has
// no key: ErrUnsupported.
func Me(ctx context.Context, rt Runtime) (wire.Principal, error) {
	r, ok := rt.(restRuntime)
	if !ok {
		return wire.Principal{}, errdefs.Errorf(errdefs.ErrUnsupported, "a local runtime has no key")
	}
	return r.c.Me(ctx)
}

type restRuntime struct{ c *restclient.Client }

func (r restRuntime) Create(ctx context.Context, o abi.BoxOptions) (Box, error) {
	b, err := r.c.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return restBox{b}, nil
}

func (r restRuntime) Get(ctx context.Context, idOrName string) (Box, error) {
	b, err := r.c.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return restBox{b}, nil
}

func (r restRuntime) List(ctx context.Context) ([]boxlite.BoxInfo, error) { return r.c.List(ctx) }

func (r restRuntime) ImageLoad(context.Context, string) ([]abi.ImageInfo, error) {
	return nil, errdefs.Errorf(errdefs.ErrUnsupported, "image load from a local file on a REST runtime (load it on the server: boxlite image load)")
}

func (r restRuntime) ImageList(ctx context.Context) ([]abi.ImageInfo, error) { return r.c.Images(ctx) }

func (r restRuntime) ImagePull(ctx context.Context, ref string) (abi.ImageInfo, error) {
	return r.c.Pull(ctx, ref)
}

func (r restRuntime) ImageRemove(context.Context, string) error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "image remove on a REST runtime (BoxLite's REST API has no image removal)")
}

func (r restRuntime) Metrics(ctx context.Context) (abi.RuntimeMetrics, error) {
	return r.c.Metrics(ctx)
}

func (r restRuntime) ImportBox(context.Context, string, string, []boxlite.BoxOption) (Box, error) {
	return nil, errdefs.Errorf(errdefs.ErrUnsupported, "import of a box from a local archive on a REST runtime")
}

func (r restRuntime) Remote() bool { return true }
func (r restRuntime) Close()       { r.c.Close() }

type restBox struct{ *restclient.Box }

func (b restBox) Exec(ctx context.Context, cmd boxlite.Command) (Execution, error) {
	e, err := b.Box.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return restExec{e}, nil
}

func (b restBox) Clone(ctx context.Context, opts boxlite.CloneOptions) (Box, error) {
	c, err := b.Box.Clone(ctx, opts)
	if err != nil {
		return nil, err
	}
	return restBox{c}, nil
}

func (b restBox) Fork(ctx context.Context, count int, names []string) ([]Box, error) {
	fs, err := b.Box.Fork(ctx, count, names)
	if err != nil {
		return nil, err
	}
	out := make([]Box, len(fs))
	for i, f := range fs {
		out[i] = restBox{f}
	}
	return out, nil
}

func (b restBox) DialTunnel(ctx context.Context, port int) (TunnelConn, error) {
	t, err := b.Box.DialTunnel(ctx, port)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (b restBox) ForwardTunnel(_ context.Context, port int, listen boxlite.SocketAddress) (Forwarder, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "tunnel: port %d: want 1 to 65535", port)
	}
	f, err := boxlite.NewTunnelForwarder(listen, func(ctx context.Context) (boxlite.TunnelStream, error) {
		t, err := b.Box.DialTunnel(ctx, port)
		if err != nil {
			return nil, err
		}
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (b restBox) UpdateOutbound(context.Context, string, []string) error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "update outbound of a box on a REST runtime (the server has no route for it)")
}

func (b restBox) UpdateInbound(context.Context, string, []string) error {
	return errdefs.Errorf(errdefs.ErrUnsupported, "update inbound of a box on a REST runtime (the server has no route for it)")
}

type restExec struct{ *restclient.Execution }

func (e restExec) Stdin() io.WriteCloser { return e.Execution.Stdin }
func (e restExec) Stdout() io.Reader     { return e.Execution.Stdout }
func (e restExec) Stderr() io.Reader     { return e.Execution.Stderr }
