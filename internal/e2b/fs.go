package e2b

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	pb "github.com/boxlite/boxlite/internal/e2b/envd/filesystem"
	"github.com/boxlite/boxlite/internal/e2b/envd/filesystem/filesystemconnect"
)

type fsService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *Server
}

// args are a request's user and resolved path.
func args(ctx context.Context, h http.Header, p string) (*sandbox, string, string, error) {
	user, err := userOf(h)
	if err != nil {
		return nil, "", "", connectErr(err)
	}
	rp, err := resolve(p, user)
	if err != nil {
		return nil, "", "", connectErr(err)
	}
	return sandboxOf(ctx), user, rp, nil
}

func (sb *sandbox) one(ctx context.Context, user, op string, a ...string) (*pb.EntryInfo, error) {
	es, err := sb.fsOp(ctx, user, op, a...)
	if err != nil {
		return nil, connectErr(err)
	}
	if len(es) != 1 {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("%s %q: the box answered %d entries", op, truncate(a[0]), len(es)))
	}
	in, err := sb.entries(ctx, user, "", es)
	if err != nil {
		return nil, connectErr(err)
	}
	return in[0], nil
}

func (f *fsService) Stat(ctx context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := sb.one(ctx, user, "stat", p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

func (f *fsService) MakeDir(ctx context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := sb.one(ctx, user, "mkdir", p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

func (f *fsService) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	sb, user, src, err := args(ctx, req.Header(), req.Msg.Source)
	if err != nil {
		return nil, err
	}
	dst, err := resolve(req.Msg.Destination, user)
	if err != nil {
		return nil, connectErr(err)
	}
	e, err := sb.one(ctx, user, "move", src, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

func (f *fsService) Remove(ctx context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connectErr(statusErr(http.StatusBadRequest, "removing / is refused"))
	}
	if _, err := sb.fsOp(ctx, user, "remove", p); err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

func (sb *sandbox) list(ctx context.Context, user, p string, depth uint32) ([]*pb.EntryInfo, error) {
	if depth == 0 {
		depth = 1
	}
	if depth > maxDepth {
		return nil, statusErr(http.StatusBadRequest, "depth %d: at most %d", depth, maxDepth)
	}
	es, err := sb.fsOp(ctx, user, "list", p, fmt.Sprint(depth))
	if err != nil {
		return nil, err
	}
	return sb.entries(ctx, user, p, es)
}

func (f *fsService) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	es, err := sb.list(ctx, user, p, req.Msg.Depth)
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(&pb.ListDirResponse{Entries: es}), nil
}

func (f *fsService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return err
	}
	if req.Msg.IncludeEntry {
		return connectErr(notServed("include_entry"))
	}
	w, err := sb.newWatcher(ctx, user, p, req.Msg.Recursive)
	if err != nil {
		return connectErr(err)
	}
	defer sb.dropWatcher(w)
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keep := time.NewTicker(50 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return connectErr(ctx.Err())
		case <-w.done:
			return connect.NewError(connect.CodeAborted, fmt.Errorf("the watch of %q ended: %v", truncate(p), w.why()))
		case <-keep.C:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case <-w.kick:
			for _, ev := range w.drain() {
				if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
					return err
				}
			}
		}
	}
}

func (f *fsService) CreateWatcher(ctx context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	sb, user, p, err := args(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if req.Msg.IncludeEntry {
		return nil, connectErr(notServed("include_entry"))
	}
	w, err := sb.newWatcher(ctx, user, p, req.Msg.Recursive)
	if err != nil {
		return nil, connectErr(err)
	}
	w.polled = true
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: w.id}), nil
}

func (sb *sandbox) watcher(id string) (*watcher, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	w := sb.watchers[id]
	if w == nil || !w.polled {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", truncate(id)))
	}
	return w, nil
}

func (f *fsService) GetWatcherEvents(ctx context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	w, err := sandboxOf(ctx).watcher(req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	evs := w.drain()
	select {
	case <-w.done:
		if len(evs) == 0 {
			sandboxOf(ctx).dropWatcher(w)
			return nil, connect.NewError(connect.CodeAborted, fmt.Errorf("the watch ended: %v", w.why()))
		}
	default:
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *fsService) RemoveWatcher(ctx context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	sb := sandboxOf(ctx)
	w, err := sb.watcher(req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	sb.dropWatcher(w)
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}
