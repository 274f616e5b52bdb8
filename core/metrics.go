package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/protocol"
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
type RuntimeMetrics struct {
	// BoxesCreatedTotal counts the boxes Create made.
	BoxesCreatedTotal uint64 `json:"boxes_created_total"`
	// BoxesFailedTotal counts the starts (by Create or Start) that failed.
	BoxesFailedTotal uint64 `json:"boxes_failed_total"`
	// NumRunningBoxes is how many of the boxes this runtime has handles on
	// are running now (started here, or reattached with Get or List).
	NumRunningBoxes uint64 `json:"num_running_boxes"`
	// TotalCommandsExecuted counts the exec requests this runtime sent, to
	// any box; TotalExecErrors those of them that never ran (see above),
	// including those whose box connection ended before they started.
	TotalCommandsExecuted uint64 `json:"total_commands_executed"`
	TotalExecErrors       uint64 `json:"total_exec_errors"`
}

// BoxMetrics are a running box's counters and samples. A nil field is not
// known: a stage of a boot that another process made before this library
// recorded stages, the network of a box without one.
type BoxMetrics struct {
	// CommandsExecutedTotal counts exec requests from every client of the
	// box; ExecErrorsTotal those of them that never ran.
	CommandsExecutedTotal uint64 `json:"commands_executed_total"`
	ExecErrorsTotal       uint64 `json:"exec_errors_total"`
	// BytesSentTotal counts the stdin bytes sent to the box's execs;
	// BytesReceivedTotal their stdout and stderr (file copies not included).
	BytesSentTotal     uint64 `json:"bytes_sent_total"`
	BytesReceivedTotal uint64 `json:"bytes_received_total"`
	// GuestBootDurationMs is the host's wall time from VMM start to the
	// guest agent's hello (BoxRuntimeInfo.BootMs).
	GuestBootDurationMs float64 `json:"guest_boot_duration_ms"`
	// TotalCreateDurationMs is the box's last start, from Start (or
	// Create's start) to the box being ready: the stages below. An image
	// pull that Create makes first is not in it.
	TotalCreateDurationMs *float64 `json:"total_create_duration_ms"`
	// StageImagePrepareMs: find the image and make its layers' ext4 disks
	// (cached by digest: fast after the first box of an image).
	StageImagePrepareMs *float64 `json:"stage_image_prepare_ms"`
	// StageBoxConfigMs: make the box's writable disk (the first start) and
	// write the shim's configuration.
	StageBoxConfigMs *float64 `json:"stage_box_config_ms"`
	// StageBootQueueMs: wait for a boot slot (see WithMaxConcurrentBoots).
	StageBootQueueMs *float64 `json:"stage_boot_queue_ms"`
	// StageBoxSpawnMs: start the shim until its ready answer: the VMM's
	// confinement, the network and file daemons, and the guest's boot
	// (GuestBootDurationMs).
	StageBoxSpawnMs *float64 `json:"stage_box_spawn_ms"`
	// StageContainerInitMs: the guest agent's own setup, from its start to
	// its hello (modules, disks, overlay root), by the guest's clock as the
	// guest reports it.
	StageContainerInitMs *float64 `json:"stage_container_init_ms"`
	// CPUPercent is the VMM's CPU use over the shim's last 1 s sample, in
	// percent of one host CPU (up to 100 per vCPU); MemoryBytes its resident
	// memory. Nil from a shim too old to report them.
	CPUPercent  *float64 `json:"cpu_percent"`
	MemoryBytes *uint64  `json:"memory_bytes"`
	// Network counters (protocol.NetworkStats); nil without a network.
	// NetworkTCPConnections counts the connections opened, not those open.
	NetworkBytesSent      *uint64 `json:"network_bytes_sent"`     // host to guest
	NetworkBytesReceived  *uint64 `json:"network_bytes_received"` // guest to host
	NetworkTCPConnections *uint64 `json:"network_tcp_connections"`
}

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
		if b.State() == StateRunning {
			m.NumRunningBoxes++
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
	BoxConfigMs    float64 `json:"box_config_ms"`
	BootQueueMs    float64 `json:"boot_queue_ms"`
	BoxSpawnMs     float64 `json:"box_spawn_ms"`
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
		m.NetworkTCPConnections = &n.Stats.TCPConns
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
		m.StageBootQueueMs, m.StageBoxSpawnMs = &rec.BootQueueMs, &rec.BoxSpawnMs
	}
	return m, nil
}
