package restclient

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// Box is a box on the server.
type Box struct {
	c  *Client
	id string

	// autoRemove: Stop removes the box (BoxOptions.AutoRemove of a box
	// this handle created; the server keeps stopped boxes).
	autoRemove bool

	mu   sync.Mutex
	last boxlite.BoxInfo // as the server last showed it
}

func (c *Client) box(w wire.Box) *Box {
	return &Box{c: c, id: w.BoxID, last: boxInfo(w)}
}

func (b *Box) path(rest string) string { return "/boxes/" + seg(b.id) + rest }

// ID is the box's id.
func (b *Box) ID() string { return b.id }

// Info is the box as the server shows it now; as it last showed it when
// the server does not answer within infoTimeout.
func (b *Box) Info() boxlite.BoxInfo {
	var w wire.Box
	if err := b.c.doWithin(context.Background(), infoTimeout, request{method: "GET", path: b.path("")}, &w); err == nil {
		b.note(w)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	info := b.last
	info.Config.AutoRemove = b.autoRemove
	return info
}

func (b *Box) note(w wire.Box) {
	b.mu.Lock()
	b.last = boxInfo(w)
	b.mu.Unlock()
}

// Start boots the box.
func (b *Box) Start(ctx context.Context) error {
	var w wire.Box
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/start")}, &w); err != nil {
		return err
	}
	b.note(w)
	return nil
}

// Pause saves the running box with its memory on the server (a boxlite
// server's route, beyond BoxLite's API).
func (b *Box) Pause(ctx context.Context) (boxlite.PauseInfo, error) {
	var w wire.PauseResponse
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/pause")}, &w); err != nil {
		return boxlite.PauseInfo{}, err
	}
	at, err := time.Parse(time.RFC3339Nano, w.SavedAt)
	if err != nil {
		return boxlite.PauseInfo{}, errdefs.Errorf(errdefs.ErrInternal, "pause: the server's saved_at %q: %v", w.SavedAt, err)
	}
	b.mu.Lock()
	b.last.State = boxlite.StatePaused
	b.mu.Unlock()
	return boxlite.PauseInfo{SavedAt: at, StateBytes: w.StateBytes, SaveMs: w.SaveMs}, nil
}

// Resume restores the paused box on the server.
func (b *Box) Resume(ctx context.Context) error {
	var w wire.Box
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/resume")}, &w); err != nil {
		return err
	}
	b.note(w)
	return nil
}

// Fork makes count running boxes on the server from the running box's
// state at one instant.
func (b *Box) Fork(ctx context.Context, count int, names []string) ([]*Box, error) {
	var w wire.ForkBoxResponse
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/fork"), json: wire.ForkBoxRequest{Count: count, Names: names}}, &w); err != nil {
		return nil, err
	}
	out := make([]*Box, len(w.Boxes))
	for i, x := range w.Boxes {
		out[i] = b.c.box(x)
	}
	return out, nil
}

// Stop stops the box, and removes it if it was created with AutoRemove.
func (b *Box) Stop(ctx context.Context) error {
	var w wire.Box
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/stop")}, &w); err != nil {
		return err
	}
	b.note(w)
	if b.autoRemove {
		if err := b.Remove(ctx, true); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Remove removes the box (force: a running one too).
func (b *Box) Remove(ctx context.Context, force bool) error {
	q := url.Values{"force": {strconv.FormatBool(force)}}
	return b.c.do(ctx, request{method: "DELETE", path: b.path(""), query: q}, nil)
}

// Metrics are the box's counters and samples.
func (b *Box) Metrics(ctx context.Context) (boxlite.BoxMetrics, error) {
	var w wire.BoxMetrics
	if err := b.c.doWithin(ctx, infoTimeout, request{method: "GET", path: b.path("/metrics")}, &w); err != nil {
		return boxlite.BoxMetrics{}, err
	}
	m := boxlite.BoxMetrics{CommandsExecutedTotal: w.CommandsExecutedTotal, ExecErrorsTotal: w.ExecErrorsTotal,
		BytesSentTotal: w.BytesSentTotal, BytesReceivedTotal: w.BytesReceivedTotal, CPUPercent: w.CPUPercent,
		MemoryBytes: w.MemoryBytes, NetworkBytesSent: w.NetworkBytesSent, NetworkBytesReceived: w.NetworkBytesReceived,
		NetworkTCPConnections: w.NetworkTCPConnections, NetworkTCPErrors: w.NetworkTCPErrors}
	if t := w.BootTiming; t != nil {
		ms := func(p *int64) *float64 {
			if p == nil {
				return nil
			}
			f := float64(*p)
			return &f
		}
		if t.GuestBootMs != nil {
			m.GuestBootDurationMs = float64(*t.GuestBootMs)
		}
		m.TotalCreateDurationMs, m.StageImagePrepareMs, m.StageBoxConfigMs = ms(t.TotalCreateMs), ms(t.ImagePrepareMs), ms(t.BoxConfigMs)
		m.StageBoxSpawnMs, m.StageContainerInitMs = ms(t.BoxSpawnMs), ms(t.ContainerInitMs)
	}
	return m, nil
}

// CreateSnapshot snapshots the box's disk.
func (b *Box) CreateSnapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error) {
	return b.CreateSnapshotWith(ctx, name, boxlite.SnapshotOptions{})
}

// CreateSnapshotWith snapshots the box, with its memory if asked (a
// boxlite server's extension of BoxLite's API).
func (b *Box) CreateSnapshotWith(ctx context.Context, name string, opts boxlite.SnapshotOptions) (boxlite.SnapshotInfo, error) {
	var w wire.Snapshot
	err := b.c.do(ctx, request{method: "POST", path: b.path("/snapshots"), json: wire.CreateSnapshotRequest{Name: name, Memory: opts.Memory}}, &w)
	return snapshot(w), err
}

// Snapshots are the box's snapshots.
func (b *Box) Snapshots(ctx context.Context) ([]boxlite.SnapshotInfo, error) {
	var w wire.ListSnapshotsResponse
	if err := b.c.doWithin(ctx, infoTimeout, request{method: "GET", path: b.path("/snapshots")}, &w); err != nil {
		return nil, err
	}
	out := make([]boxlite.SnapshotInfo, len(w.Snapshots))
	for i, s := range w.Snapshots {
		out[i] = snapshot(s)
	}
	return out, nil
}

// Snapshot is the box's snapshot name.
func (b *Box) Snapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error) {
	var w wire.Snapshot
	err := b.c.doWithin(ctx, infoTimeout, request{method: "GET", path: b.path("/snapshots/" + seg(name))}, &w)
	return snapshot(w), err
}

// RemoveSnapshot removes the snapshot name.
func (b *Box) RemoveSnapshot(ctx context.Context, name string) error {
	return b.c.do(ctx, request{method: "DELETE", path: b.path("/snapshots/" + seg(name))}, nil)
}

// RestoreSnapshot puts the stopped box's disk back as the snapshot had it.
func (b *Box) RestoreSnapshot(ctx context.Context, name string) error {
	return b.c.do(ctx, request{method: "POST", path: b.path("/snapshots/" + seg(name) + "/restore")}, nil)
}

func snapshot(w wire.Snapshot) boxlite.SnapshotInfo {
	return boxlite.SnapshotInfo{ID: w.ID, BoxID: w.BoxID, Name: w.Name, CreatedAt: w.CreatedAt,
		SizeBytes: w.SizeBytes, ContainerDiskBytes: w.ContainerDiskBytes, Memory: w.Memory, MemoryBytes: w.MemoryBytes}
}

// Clone makes a stopped copy of the stopped box on the server. A clone of
// one of its snapshots is not in the API.
func (b *Box) Clone(ctx context.Context, opts boxlite.CloneOptions) (*Box, error) {
	if opts.Snapshot != "" {
		return nil, unsupported("clone from a snapshot")
	}
	var w wire.Box
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/clone"), json: wire.CloneBoxRequest{Name: opts.Name}}, &w); err != nil {
		return nil, err
	}
	return b.c.box(w), nil
}

// maxExport bounds an exported archive: the largest disk and room for
// its image.
const maxExport = (abi.MaxDiskSizeGB + 64) << 30

// Export writes the stopped box, as the server exports it, to one archive
// file here: dest is a file, or a directory in which the archive is
// <name or id>.boxlite. The archive is written beside its path and renamed
// into place when complete, so a failed export leaves nothing.
func (b *Box) Export(ctx context.Context, dest string) (string, error) {
	if dest == "" {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "export: destination is empty")
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		name := b.Info().Name
		if name == "" {
			name = b.id
		}
		dest = filepath.Join(dest, name+".boxlite")
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".export-*.boxlite")
	if err != nil {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "export: %v", err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	defer tmp.Close()
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	resp, err := b.c.send(ctx, request{method: "POST", path: b.path("/export"), json: wire.ExportBoxRequest{}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, maxExport+1))
	switch {
	case err != nil:
		return "", transportError("export", err)
	case n > maxExport:
		return "", errdefs.Errorf(errdefs.ErrLimit, "export: the archive is over %d bytes", int64(maxExport))
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return "", errdefs.Errorf(errdefs.ErrUnreachable, "export: %d of %d bytes came", n, resp.ContentLength)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "export: %v", err)
	}
	return dest, nil
}
