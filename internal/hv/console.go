package hv

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// panicLine is the last "Kernel panic" line (not its end marker) near the end of the console
// log at path, cut to 200 bytes ("" if none). The guest writes the log:
// it is read bounded and cleaned like shimapi.ConsoleTail.
func panicLine(path string) string {
	if path == "" {
		return ""
	}
	lines := strings.Split(shimapi.ConsoleTail(path, 16<<10), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if j := strings.Index(lines[i], "Kernel panic"); j >= 0 && !strings.Contains(lines[i], "---[ end") {
			l := strings.TrimSpace(lines[i][j:])
			if len(l) > 200 {
				l = strings.ToValidUTF8(l[:200], "") + "..."
			}
			return l
		}
	}
	return ""
}

// consoleLog appends the guest console to a file that it keeps under
// shimapi.ConsoleLogMax by renaming it to path+".1" when full. The console is the
// guest's to write: nothing it prints may fill the host disk.
type consoleLog struct {
	path string
	f    *os.File
	size int64
}

func openConsoleLog(path string) (*consoleLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("hv: Config.ConsoleLog %q: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hv: Config.ConsoleLog %q: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return &consoleLog{path: path, f: f, size: fi.Size()}, nil
}

func (l *consoleLog) Write(p []byte) (int, error) {
	if l.size+int64(len(p)) > shimapi.ConsoleLogMax {
		l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

func (l *consoleLog) rotate() {
	if os.Rename(l.path, l.path+".1") != nil {
		l.f.Truncate(0)
		l.size = 0
		return
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		l.f.Truncate(0) // keep writing to the renamed file, from empty
		l.size = 0
		return
	}
	l.f.Close()
	l.f, l.size = f, 0
}

func (l *consoleLog) Close() error { return l.f.Close() }

// copyFrom writes what QEMU's console socket delivers until it closes.
func (l *consoleLog) copyFrom(c io.ReadCloser) {
	io.Copy(l, c)
	c.Close()
	l.Close()
}
