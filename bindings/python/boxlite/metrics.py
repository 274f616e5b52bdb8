"""Runtime and box metrics, with the BoxLite SDK's attribute names.

A box's counters are kept by its shim, for every process that uses the box,
since the box last started; a runtime's are its own, in this process. An
exec "error" is an exec that never ran: refused, or answered by the box with
an error instead of starting (no such binary, unknown user, missing working
directory). A command that exits non-zero is executed, not an error."""

from typing import Any, Dict, Optional


class RuntimeMetrics:
    """``await runtime.metrics()``: this runtime's counters since it opened."""

    def __init__(self, data: Dict[str, Any]):
        self.raw = data
        #: Boxes ``create`` made.
        self.boxes_created_total: int = data.get("boxes_created_total", 0)
        #: Starts (by ``create`` or ``start``) that failed.
        self.boxes_failed_total: int = data.get("boxes_failed_total", 0)
        #: Boxes this runtime has handles on that are running now.
        self.num_running_boxes: int = data.get("num_running_boxes", 0)
        #: Boxes this runtime has handles on that are paused (memory on disk, no process).
        self.num_paused_boxes: int = data.get("num_paused_boxes", 0)
        #: Exec requests this runtime sent, to any box.
        self.total_commands_executed: int = data.get("total_commands_executed", 0)
        #: Of those, the ones that never ran (including those whose box
        #: connection ended before they started).
        self.total_exec_errors: int = data.get("total_exec_errors", 0)

    def __repr__(self) -> str:
        return (f"RuntimeMetrics(boxes_created_total={self.boxes_created_total}, "
                f"boxes_failed_total={self.boxes_failed_total}, num_running_boxes={self.num_running_boxes}, "
                f"num_paused_boxes={self.num_paused_boxes}, "
                f"total_commands_executed={self.total_commands_executed}, total_exec_errors={self.total_exec_errors})")


class BoxMetrics:
    """``await box.metrics()``: a running box's counters and samples. ``None``
    is not known (a stage of a start this library did not record, the network
    of a box without one). Durations are in milliseconds."""

    def __init__(self, data: Dict[str, Any]):
        self.raw = data
        #: Exec requests from every client of the box.
        self.commands_executed_total: int = data.get("commands_executed_total", 0)
        #: Of those, the ones that never ran.
        self.exec_errors_total: int = data.get("exec_errors_total", 0)
        #: Stdin bytes sent to the box's execs.
        self.bytes_sent_total: int = data.get("bytes_sent_total", 0)
        #: Stdout and stderr bytes of its execs (file copies not included).
        self.bytes_received_total: int = data.get("bytes_received_total", 0)
        #: VMM start to agent ready, by the host's clock.
        self.guest_boot_duration_ms: Optional[float] = data.get("guest_boot_duration_ms")
        #: The box's last start, from start to ready: the stage_* below but
        #: container_init (an image pull by ``create`` is not in it).
        self.total_create_duration_ms: Optional[float] = data.get("total_create_duration_ms")
        #: Find the image in the store.
        self.stage_image_prepare_ms: Optional[float] = data.get("stage_image_prepare_ms")
        #: Make the image's layers into the guest's root disks (cached per image).
        self.stage_guest_rootfs_ms: Optional[float] = data.get("stage_guest_rootfs_ms")
        #: Make the box's writable disk (first start) and clear its directory.
        self.stage_filesystem_setup_ms: Optional[float] = data.get("stage_filesystem_setup_ms")
        #: Write the shim's configuration.
        self.stage_box_config_ms: Optional[float] = data.get("stage_box_config_ms")
        #: Wait for a boot slot (boots at once are bounded per home).
        self.stage_boot_queue_ms: Optional[float] = data.get("stage_boot_queue_ms")
        #: Shim start to ready, including the guest's boot.
        self.stage_box_spawn_ms: Optional[float] = data.get("stage_box_spawn_ms")
        #: The guest agent's own setup (modules, disks, root), by the guest's clock.
        self.stage_container_init_ms: Optional[float] = data.get("stage_container_init_ms")
        #: The VMM's CPU since the shim's latest sample at least 1 s old
        #: (taken when asked), in percent of one host CPU (up to 100 per vCPU).
        self.cpu_percent: Optional[float] = data.get("cpu_percent")
        #: The VMM's resident memory.
        self.memory_bytes: Optional[int] = data.get("memory_bytes")
        #: Network bytes host to guest, guest to host, TCP connections opened.
        self.network_bytes_sent: Optional[int] = data.get("network_bytes_sent")
        self.network_bytes_received: Optional[int] = data.get("network_bytes_received")
        self.network_tcp_connections: Optional[int] = data.get("network_tcp_connections")
        #: BoxLite's failed TCP connections: not measured here, always None.
        self.network_tcp_errors: Optional[int] = data.get("network_tcp_errors")

    def __repr__(self) -> str:
        return (f"BoxMetrics(commands_executed_total={self.commands_executed_total}, "
                f"exec_errors_total={self.exec_errors_total}, bytes_sent_total={self.bytes_sent_total}, "
                f"bytes_received_total={self.bytes_received_total}, cpu_percent={self.cpu_percent}, "
                f"memory_bytes={self.memory_bytes}, guest_boot_duration_ms={self.guest_boot_duration_ms})")
