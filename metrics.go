package boxlite

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
)

// Metrics, with BoxLite's names. A box's exec and byte counters are kept by
// its shim, which sees every exec of every process that uses the box, so a
// process that reattaches reads the same counts as the one that started it;
// they are totals since the box's last start. A runtime's counters are this
// runtime's own, in this process, since it was opened.
//
// An exec "error" is an exec that never ran: refused, or answered by the box
// with an error instead of starting (no such binary, unknown user, missing
// working directory, the agent's limits). A process that runs and exits
// non-zero, or times out, is a command executed, not an error.

// RuntimeMetrics are a runtime's counters.
type RuntimeMetrics = abi.RuntimeMetrics

// BoxMetrics are a running box's counters and samples. A nil field is not
// known: a stage of a boot that another process made before this library
// recorded stages, the network of a box without one.
type BoxMetrics = abi.BoxMetrics

// runtimeCounters are the counts behind RuntimeMetrics.
type runtimeCounters struct {
	created, failed, execs, execErrors atomic.Uint64
}

// Metrics are the runtime's counters now.
func (r *Runtime) Metrics() RuntimeMetrics {
	r.mu.Lock()
	boxes := make([]*Box, 0, len(r.boxes))
	for _, b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	m := RuntimeMetrics{BoxesCreatedTotal: r.counters.created.Load(), BoxesFailedTotal: r.counters.failed.Load(),
		TotalCommandsExecuted: r.counters.execs.Load(), TotalExecErrors: r.counters.execErrors.Load()}
	for _, b := range boxes {
		switch b.State() {
		case StateRunning:
			m.NumRunningBoxes++
		case StatePaused:
			m.NumPausedBoxes++
		}
	}
	return m
}

// openExec sends an exec request on c for e, counted.
func (rc *runtimeCounters) openExec(c *conn, e *Execution, req protocol.Exec) error {
	rc.execs.Add(1)
	if _, err := c.open(&countedExec{Execution: e, rc: rc}, protocol.TExec, req); err != nil {
		rc.execErrors.Add(1)
		return err
	}
	return nil
}

// countedExec counts an exec that ends before its process started.
type countedExec struct {
	*Execution
	rc      *runtimeCounters
	started atomic.Bool
}

func (x *countedExec) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStarted:
		x.started.Store(true)
	case protocol.TError:
		if !x.started.Load() {
			x.rc.execErrors.Add(1)
		}
	}
	x.Execution.frame(f)
}

func (x *countedExec) fail(err error) {
	if !x.started.Load() {
		x.rc.execErrors.Add(1)
	}
	x.Execution.fail(err)
}

// bootStages times a start's stages (BoxMetrics.Stage*) as they pass.
type bootStages struct {
	start, last time.Time
	rec         stagesRecord
}

// stagesRecord is a start's stages as this library keeps them, in the box
// directory (stagesFile), for any process that asks for the box's metrics.
type stagesRecord struct {
	TotalMs        float64 `json:"total_ms"`
	ImagePrepareMs float64 `json:"image_prepare_ms"`
	// GuestRootfsMs and FilesystemSetupMs: nil in a record written before
	// they were split off image_prepare and box_config.
	GuestRootfsMs     *float64 `json:"guest_rootfs_ms,omitempty"`
	FilesystemSetupMs *float64 `json:"filesystem_setup_ms,omitempty"`
	BoxConfigMs       float64  `json:"box_config_ms"`
	BootQueueMs       float64  `json:"boot_queue_ms"`
	BoxSpawnMs        float64  `json:"box_spawn_ms"`
}

const stagesFile = "stages.json"

func newBootStages() *bootStages {
	now := time.Now()
	return &bootStages{start: now, last: now}
}

// lap ends a stage: *stage is the time since the previous one ended.
func (t *bootStages) lap(stage *float64) {
	now := time.Now()
	*stage = ms(now.Sub(t.last))
	t.last = now
}

// lapNew is lap for a stage a record may lack.
func (t *bootStages) lapNew(stage **float64) {
	*stage = new(float64)
	t.lap(*stage)
}

// save records the stages of a start that has finished.
func (t *bootStages) save(b *Box) {
	t.rec.TotalMs = ms(time.Since(t.start))
	writeJSON(b.path(stagesFile), t.rec) // best effort: without it, stages are unknown
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Metrics are the box's counters and samples now, as its shim reports
// them. The box must be running.
func (b *Box) Metrics(ctx context.Context) (BoxMetrics, error) {
	if err := ctx.Err(); err != nil {
		return BoxMetrics{}, errdefs.Errorf(errdefs.ErrTimeout, "metrics: %v", err)
	}
	b.refresh() // another process may have started it
	if b.State() == StatePaused {
		if err := b.Resume(ctx); err != nil {
			return BoxMetrics{}, fmt.Errorf("metrics: %w", err)
		}
	}
	b.mu.Lock()
	c, state := b.conn, b.state
	b.mu.Unlock()
	if state != StateRunning || c == nil {
		if state == StateStopped {
			return BoxMetrics{}, fmt.Errorf("metrics: %w", b.stoppedError())
		}
		return BoxMetrics{}, errdefs.Errorf(errdefs.ErrInvalidState, "metrics: box %s is %s", b.rec.ID, state)
	}
	var info protocol.Info
	if err := c.request(protocol.TInfo, nil, &info); err != nil {
		return BoxMetrics{}, fmt.Errorf("metrics: %w", err)
	}
	m := BoxMetrics{GuestBootDurationMs: info.BootMs}
	if s := info.Metrics; s != nil {
		m.CommandsExecutedTotal, m.ExecErrorsTotal = s.Execs, s.ExecErrors
		m.BytesSentTotal, m.BytesReceivedTotal = s.StdinBytes, s.OutputBytes
		m.CPUPercent, m.MemoryBytes = &s.CPUPercent, &s.MemoryBytes
	}
	if n := info.Network; n != nil && n.Stats != nil {
		m.NetworkBytesSent, m.NetworkBytesReceived = &n.Stats.BytesToGuest, &n.Stats.BytesFromGuest
		m.NetworkTCPConnections, m.NetworkTCPErrors = &n.Stats.TCPConns, &n.Stats.TCPErrors
	}
	// The guest's own timings are bounded (Hello.Bound) but its to report:
	// cap its setup at the boot the host measured.
	if h := info.Hello; h.ReadyMs > 0 {
		init := min(max(h.ReadyMs-h.KernelMs, 0), info.BootMs)
		m.StageContainerInitMs = &init
	}
	var rec stagesRecord
	if readJSON(b.path(stagesFile), &rec) == nil {
		m.TotalCreateDurationMs, m.StageImagePrepareMs, m.StageBoxConfigMs = &rec.TotalMs, &rec.ImagePrepareMs, &rec.BoxConfigMs
		m.StageGuestRootfsMs, m.StageFilesystemSetupMs = rec.GuestRootfsMs, rec.FilesystemSetupMs
		m.StageBootQueueMs, m.StageBoxSpawnMs = &rec.BootQueueMs, &rec.BoxSpawnMs
	}
	return m, nil
}
