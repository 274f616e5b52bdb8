package restclient

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"sync"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
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
		NetworkTCPConnections: w.NetworkTCPConnections}
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

// CreateSnapshot snapshots the stopped box's disk.
func (b *Box) CreateSnapshot(ctx context.Context, name string) (boxlite.SnapshotInfo, error) {
	var w wire.Snapshot
	err := b.c.do(ctx, request{method: "POST", path: b.path("/snapshots"), json: wire.CreateSnapshotRequest{Name: name}}, &w)
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
		SizeBytes: w.SizeBytes, ContainerDiskBytes: w.ContainerDiskBytes}
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

// Export is not offered on a REST runtime: the archive would be the
// server's to write.
func (b *Box) Export(ctx context.Context, dest string) (string, error) {
	return "", unsupported("export to a local archive")
}
