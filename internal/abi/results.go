package abi

// Results the C ABI returns that core computes as they are: core's types
// are aliases of these.

// RuntimeMetrics are a runtime's counters.
type RuntimeMetrics struct {
	// BoxesCreatedTotal counts the boxes Create made.
	BoxesCreatedTotal uint64 `json:"boxes_created_total" doc:"the boxes created"`
	// BoxesFailedTotal counts the starts (by Create or Start) that failed.
	BoxesFailedTotal uint64 `json:"boxes_failed_total" doc:"the starts that failed"`
	// NumRunningBoxes is how many of the boxes this runtime has handles on
	// are running now (started here, or reattached with Get or List).
	NumRunningBoxes uint64 `json:"num_running_boxes" doc:"of the boxes this runtime has handles on"`
	// NumPausedBoxes is how many of them are paused (their memory saved
	// to disk, no process).
	NumPausedBoxes uint64 `json:"num_paused_boxes" doc:"of those, the paused ones (memory saved to disk, no process)"`
	// TotalCommandsExecuted counts the exec requests this runtime sent, to
	// any box; TotalExecErrors those of them that never ran (see above),
	// including those whose box connection ended before they started.
	TotalCommandsExecuted uint64 `json:"total_commands_executed" doc:"the exec requests it sent"`
	TotalExecErrors       uint64 `json:"total_exec_errors" doc:"of those, the ones that never ran, including those whose connection to the box ended first"`
}

// BoxMetrics are a running box's counters and samples. A nil field is not
// known: a stage of a boot that another process made before this library
// recorded stages, the network of a box without one.
type BoxMetrics struct {
	// CommandsExecutedTotal counts exec requests from every client of the
	// box; ExecErrorsTotal those of them that never ran.
	CommandsExecutedTotal uint64 `json:"commands_executed_total" doc:"exec requests, from every process that uses the box"`
	ExecErrorsTotal       uint64 `json:"exec_errors_total" doc:"of those, the ones that never ran"`
	// BytesSentTotal counts the stdin bytes sent to the box's execs;
	// BytesReceivedTotal their stdout and stderr (file copies not included).
	BytesSentTotal     uint64 `json:"bytes_sent_total" doc:"exec stdin"`
	BytesReceivedTotal uint64 `json:"bytes_received_total" doc:"exec stdout and stderr (copies excluded)"`
	// GuestBootDurationMs is the host's wall time from VMM start to the
	// guest agent's hello (BoxRuntimeInfo.BootMs).
	GuestBootDurationMs float64 `json:"guest_boot_duration_ms" doc:"VMM start to agent ready, host clock"`
	// TotalCreateDurationMs is the box's last start, from Start (or
	// Create's start) to the box being ready: the stages below. An image
	// pull that Create makes first is not in it.
	TotalCreateDurationMs *float64 `json:"total_create_duration_ms" doc:"the last start by this library, start to ready: the sum of the six stages after it"`
	// StageImagePrepareMs: find the image in the store.
	StageImagePrepareMs *float64 `json:"stage_image_prepare_ms" doc:"find the image in the store"`
	// StageGuestRootfsMs: make the image's layers into the ext4 disks the
	// guest mounts as its root (cached by digest: fast after the first box
	// of an image). Nil for a start recorded before this stage was.
	StageGuestRootfsMs *float64 `json:"stage_guest_rootfs_ms" doc:"the image's layers as the guest's root disks (cached per image)"`
	// StageFilesystemSetupMs: make the box's writable disk (the first
	// start) and clear what an earlier run left in its directory.
	StageFilesystemSetupMs *float64 `json:"stage_filesystem_setup_ms" doc:"the box's writable disk and directory"`
	// StageBoxConfigMs: write the shim's configuration.
	StageBoxConfigMs *float64 `json:"stage_box_config_ms" doc:"the shim's configuration"`
	// StageBootQueueMs: wait for a boot slot (see WithMaxConcurrentBoots).
	StageBootQueueMs *float64 `json:"stage_boot_queue_ms" doc:"wait for a boot slot"`
	// StageBoxSpawnMs: start the shim until its ready answer: the VMM's
	// confinement, the network and file daemons, and the guest's boot
	// (GuestBootDurationMs).
	StageBoxSpawnMs *float64 `json:"stage_box_spawn_ms" doc:"shim start to ready, the guest boot included"`
	// StageContainerInitMs: the guest agent's own setup, from its start to
	// its hello (modules, disks, overlay root), by the guest's clock as the
	// guest reports it.
	StageContainerInitMs *float64 `json:"stage_container_init_ms" doc:"the agent's own setup, by the guest's clock"`
	// CPUPercent is the VMM's CPU use since the shim's latest sample at
	// least 1 s old (it samples when asked, never on a timer), in percent of
	// one host CPU (up to 100 per vCPU); MemoryBytes its resident
	// memory. Nil from a shim too old to report them.
	CPUPercent  *float64 `json:"cpu_percent" doc:"the VMM's CPU since the shim's latest sample at least 1 s old (taken when asked), in percent of one host CPU (up to 100 per vCPU)"`
	MemoryBytes *uint64  `json:"memory_bytes" doc:"the VMM's resident memory"`
	// Network counters (protocol.NetworkStats); nil without a network.
	// NetworkTCPConnections counts the connections opened, not those open.
	NetworkBytesSent      *uint64 `json:"network_bytes_sent" doc:"host to guest"`
	NetworkBytesReceived  *uint64 `json:"network_bytes_received" doc:"guest to host"`
	NetworkTCPConnections *uint64 `json:"network_tcp_connections" doc:"TCP connections opened"`
	NetworkTCPErrors      *uint64 `json:"network_tcp_errors" doc:"TCP connections from the box the host could not open (refused, unreachable, timed out)"`
}

// SnapshotInfo describes a snapshot of a box's disk, as BoxLite's does.
type SnapshotInfo struct {
	ID        string `json:"id"`
	BoxID     string `json:"box_id"`
	Name      string `json:"name"`
	CreatedAt int64  `json:"created_at" doc:"unix seconds"`
	// SizeBytes is what the snapshot takes on the host (sparse, or shared
	// with the disk it was cloned from where the file system reflinks).
	SizeBytes int64 `json:"size_bytes" doc:"host bytes it takes"`
	// ContainerDiskBytes is the disk's logical size; 0 when the box had no
	// disk yet (never booted): restoring such a snapshot empties the box.
	ContainerDiskBytes int64 `json:"container_disk_bytes" doc:"the disk's size; 0 when the box had no disk yet"`
	// Memory: the snapshot keeps the box's memory and devices with its
	// disk (a running or paused box's); restoring it brings the box back
	// paused at that instant, its processes as they were.
	Memory bool `json:"memory" doc:"the box's memory is kept too: a restore brings its processes back"`
	// MemoryBytes is what the saved memory and devices take on the host.
	MemoryBytes int64 `json:"memory_bytes,omitempty" doc:"host bytes of the saved memory; 0 without memory"`
}
