package boxlite

import (
	"context"
	"os"
	"time"

	"github.com/boxlite/boxlite/internal/safetext"
	"github.com/boxlite/boxlite/internal/shimapi"
)

// BoxLog is what one of a box's logs holds: Name is "shim" (its shim's own
// log) or "console" (the guest's serial console). Text is the guest's or
// the shim's, stripped of control characters (safetext), so it is safe to
// print.
type BoxLog struct {
	Name, Text string
}

// boxLogs are the box's log files, in the order Logs returns them.
var boxLogs = []struct{ name, file string }{{"shim", shimapi.LogFile}, {"console", shimapi.ConsoleFile}}

// Logs returns the end of each of the box's logs that exists (at most
// maxBytes of each; <= 0: everything kept, which is at most two files of
// 1 MiB for the console). A box keeps its logs until it is removed.
func (b *Box) Logs(maxBytes int) []BoxLog {
	if maxBytes <= 0 {
		maxBytes = 2 * shimapi.ConsoleLogMax
	}
	var out []BoxLog
	for _, l := range boxLogs {
		if _, err := os.Stat(b.path(l.file)); err == nil {
			out = append(out, BoxLog{Name: l.name, Text: safetext.Text(shimapi.ConsoleTail(b.path(l.file), maxBytes))})
		}
	}
	return out
}

// followChunk bounds one read of a followed log.
const followChunk = 64 << 10

// FollowLogs calls f with what the box's logs gain from now on, polling
// every 200 ms, until ctx ends or the box is no longer running (then once
// more, for what it wrote as it stopped). f runs on the caller's goroutine.
func (b *Box) FollowLogs(ctx context.Context, f func(BoxLog)) error {
	offsets := make([]int64, len(boxLogs))
	for i, l := range boxLogs {
		if st, err := os.Stat(b.path(l.file)); err == nil {
			offsets[i] = st.Size()
		}
	}
	poll := func() {
		for i, l := range boxLogs {
			var text string
			offsets[i], text = readNew(b.path(l.file), offsets[i])
			if text != "" {
				f(BoxLog{Name: l.name, Text: text})
			}
		}
	}
	for b.State() == StateRunning {
		poll()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	poll()
	return nil
}

// readNew returns what was appended to path since offset (at most
// followChunk), safe to print, and the new offset; a file that shrank (the
// console log rotates) is read from its start.
func readNew(path string, offset int64) (int64, string) {
	f, err := os.Open(path)
	if err != nil {
		return offset, ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return offset, ""
	}
	if st.Size() < offset {
		offset = 0
	}
	buf := make([]byte, followChunk)
	n, _ := f.ReadAt(buf, offset)
	return offset + int64(n), safetext.Text(string(buf[:n]))
}
