//go:build linux

package agent

import (
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/filecopy"
	"github.com/boxlite/boxlite/internal/protocol"
)

// laneWait bounds how long a copy waits for the lane: the host takes it
// one copy at a time, so only a cancelled copy still ending holds it.
const laneWait = 5 * time.Second

// laneDev is the lane disk (protocol.LaneSerial), opened O_DIRECT: a
// copy's chunks move between it and aligned buffers by DMA, never through
// the page cache (slow under TCG, and stale once the host rewrites a slot).
type laneDev struct {
	f     *os.File
	fd    int // f's, for splice
	slots int // whole protocol.LaneSlot slots on the device
	busy  chan struct{}
}

// openLane opens the lane disk at node.
func openLane(node string) (*laneDev, error) {
	fd, err := unix.Open(node, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lane %s: %w", node, err)
	}
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("lane %s: size: %w", node, e)
	}
	slots := int(min(size/protocol.LaneSlot, protocol.MaxLaneSlots))
	if slots == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("lane %s: %d bytes, less than a slot", node, size)
	}
	return &laneDev{f: os.NewFile(uintptr(fd), node), fd: fd, slots: slots, busy: make(chan struct{}, 1)}, nil
}

// take holds the lane for one copy of slots slots; release gives it back.
func (l *laneDev) take(slots int) (release func(), err error) {
	if l == nil {
		return nil, errdefs.Errorf(errdefs.ErrUnsupported, "copy: this box has no lane")
	}
	if slots < 1 || slots > l.slots {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "copy: a lane of %d slots asked for, the lane has %d", slots, l.slots)
	}
	select {
	case l.busy <- struct{}{}:
		return func() { <-l.busy }, nil
	case <-time.After(laneWait):
		return nil, errdefs.Errorf(errdefs.ErrInvalidState, "copy: the lane is still held by another copy after %v", laneWait)
	}
}

// laneBuf is one slot's aligned buffer.
func laneBuf() []byte { return filecopy.AlignedBuffer(protocol.LaneSlot, laneAlign) }

// laneAlign is the O_DIRECT block: lengths are rounded up to it (a slot is
// a multiple of it, so the rounding stays in the slot).
const laneAlign = 4096

func roundUp(n int) int { return (n + laneAlign - 1) &^ (laneAlign - 1) }

// read reads chunk ch into buf (a laneBuf).
func (l *laneDev) read(buf []byte, ch protocol.LaneChunk) ([]byte, error) {
	n, err := l.f.ReadAt(buf[:roundUp(ch.Len)], ch.Off)
	if n < ch.Len {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "copy: lane read of %d bytes at %d: %d read: %v", ch.Len, ch.Off, n, err)
	}
	return buf[:ch.Len], nil
}

// write writes buf[:n] (buf a laneBuf) at off, padded to the block.
func (l *laneDev) write(buf []byte, n int, off int64) error {
	if _, err := l.f.WriteAt(buf[:roundUp(n)], off); err != nil {
		return errdefs.Errorf(errdefs.ErrInternal, "copy: lane write of %d bytes at %d: %v", n, off, err)
	}
	return nil
}
