package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/internal/backend"
)

// hostTerminal is the terminal `boxlite run -t` runs in, if any: the box's
// terminal follows its size, and with -i its input goes raw so that every key
// reaches the box as typed (the box's terminal does the echo and line
// editing, and turns ^C into SIGINT there).
type hostTerminal struct {
	in     int // stdin, when -i and it is a terminal; else -1
	sizeFd int // a terminal to take the size from (stdin, stdout or stderr); else -1

	mu    sync.Mutex
	saved *unix.Termios // stdin's settings before raw mode, until restored
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

func openHostTerminal(interactive bool) *hostTerminal {
	h := &hostTerminal{in: -1, sizeFd: -1}
	if interactive && isTerminal(0) {
		h.in = 0
	}
	for _, fd := range []int{0, 1, 2} {
		if isTerminal(fd) {
			h.sizeFd = fd
			break
		}
	}
	return h
}

// size is the host terminal's size; 0, 0 (the defaults) without one.
func (h *hostTerminal) size() (rows, cols int) {
	if h.sizeFd < 0 {
		return 0, 0
	}
	ws, err := unix.IoctlGetWinsize(h.sizeFd, unix.TIOCGWINSZ)
	if err != nil || ws.Row == 0 || ws.Col == 0 {
		return 0, 0
	}
	return int(ws.Row), int(ws.Col)
}

// makeRaw puts stdin in raw mode, as cfmakeraw(3) does.
func (h *hostTerminal) makeRaw() error {
	if h.in < 0 {
		return nil
	}
	t, err := unix.IoctlGetTermios(h.in, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	saved := *t
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := unix.IoctlSetTermios(h.in, unix.TCSETS, t); err != nil {
		return fmt.Errorf("terminal: raw mode: %w", err)
	}
	h.saved = &saved
	return nil
}

// restore puts stdin back as it was; it may be called more than once, and
// on a nil terminal.
func (h *hostTerminal) restore() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.saved != nil {
		_ = unix.IoctlSetTermios(h.in, unix.TCSETS, h.saved)
		h.saved = nil
	}
}

// followSize resizes e's terminal, started at rows x cols, whenever the
// host terminal's size changes (SIGWINCH), until e ends.
func (h *hostTerminal) followSize(e backend.Execution, rows, cols int) {
	if h.sizeFd < 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	select { // a change since e started would have no signal of its own
	case ch <- syscall.SIGWINCH:
	default:
	}
	for {
		select {
		case <-ch:
			if r, c := h.size(); r > 0 && (r != rows || c != cols) {
				if e.Resize(r, c) == nil {
					rows, cols = r, c
				}
			}
		case <-e.Done():
			return
		}
	}
}
