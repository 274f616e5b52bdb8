package e2b

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/boxlite/boxlite/errdefs"
	pb "github.com/boxlite/boxlite/internal/e2b/envd/process"
)

// A sandbox's processes are detachable executions of its box: when the
// box's streams end while its memory is kept (a pause, a fork, a snapshot
// cloned into a new sandbox) they detach and run on in the box, and the
// sandbox that runs that memory next adopts them: it attaches to each
// (Box.AttachExec) and lists, streams and signals it as one it started.
// What is kept of a process for that is a procInfo, in the sandbox's
// record (Procs) until its live side is made (Server.sandbox).

// MaxAdopted bounds the processes a pause, fork or snapshot carries over.
const MaxAdopted = DefaultProcsPerSandbox

// procInfo is a process as another run of its box's memory adopts it.
type procInfo struct {
	XID string `json:"xid"` // its detachable execution's id
	PID uint32 `json:"pid"`
	Tag string `json:"tag,omitempty"`
	Cfg []byte `json:"cfg,omitempty"` // its ProcessConfig (protobuf)
	Pty bool   `json:"pty,omitempty"`
}

// procsOf is what the sandbox of rec runs now, as procInfos: a paused
// one's are those its pause kept; a running one's are adopted first if
// they are still to be (after a restart of the server).
func (s *Server) procsOf(ctx context.Context, rec record) []procInfo {
	if rec.Paused {
		return rec.Procs
	}
	sb, _, err := s.sandbox(ctx, rec.ID)
	if err != nil {
		return nil
	}
	return sb.procInfos()
}

// procInfos is what the sandbox runs now.
func (sb *sandbox) procInfos() []procInfo {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var out []procInfo
	for _, p := range sb.procs {
		if p.x.ID() == "" || len(out) == MaxAdopted {
			continue
		}
		cfg, _ := proto.Marshal(p.cfg)
		out = append(out, procInfo{XID: p.x.ID(), PID: p.pid, Tag: p.tag, Cfg: cfg, Pty: p.pty})
	}
	return out
}

// adopt attaches sb to the processes of infos still running in its box.
// One that ended or that cannot be attached is left (logged).
func (s *Server) adopt(ctx context.Context, sb *sandbox, infos []procInfo) {
	for _, in := range infos {
		cfg := &pb.ProcessConfig{}
		if err := proto.Unmarshal(in.Cfg, cfg); err != nil || in.PID == 0 {
			continue
		}
		x, err := sb.box.AttachExec(context.WithoutCancel(ctx), in.XID)
		if err != nil {
			if !errors.Is(err, errdefs.ErrNotFound) {
				s.logf("e2b: sandbox %s: adopting process %d: %v", sb.box.ID(), in.PID, err)
			}
			continue
		}
		p := &proc{pid: in.PID, tag: in.Tag, cfg: cfg, pty: in.Pty, x: x, subs: map[*sub]struct{}{}, ended: make(chan struct{})}
		sb.mu.Lock()
		if _, taken := sb.procs[in.PID]; taken || len(sb.procs) >= s.lim.ProcsPerSandbox {
			sb.mu.Unlock()
			x.Close()
			continue
		}
		sb.procs[in.PID] = p
		sb.mu.Unlock()
		go p.pump(sb)
	}
}
