// Package capbuf is the capped output buffer of collected results: what a
// box prints is hostile input, and collecting it must not grow the host
// without bound. Box.Run, session cells and shell session commands use it.
package capbuf

import (
	"io"
	"sync"

	"github.com/boxlite/boxlite/internal/abi"
)

// Buffer keeps the first limit bytes written to it and counts the rest.
type Buffer struct {
	b       []byte
	limit   int64
	dropped int64
}

// bigOutput is the size past which a Buffer reserves its whole limit at
// once instead of doubling: a reservation costs only the pages written,
// while each doubling would leave the last buffer behind as garbage (the
// peak that counts for a 64 MiB result).
const bigOutput = 1 << 20

// New returns a Buffer keeping limit bytes; limit <= 0 is the default
// output limit (abi.DefaultOutputLimitBytes).
func New(limit int64) *Buffer {
	if limit <= 0 {
		limit = abi.DefaultOutputLimitBytes
	}
	return &Buffer{limit: limit}
}

// Write keeps what fits and drops the rest; it never fails, so a copy into
// it reads the stream to its end.
func (c *Buffer) Write(p []byte) (int, error) {
	keep := min(int64(len(p)), max(c.limit-int64(len(c.b)), 0))
	if need := int64(len(c.b)) + keep; need > int64(cap(c.b)) {
		size := max(2*int64(cap(c.b)), need, 4096)
		if size > bigOutput {
			size = c.limit
		}
		nb := make([]byte, len(c.b), min(size, c.limit))
		copy(nb, c.b)
		c.b = nb
	}
	c.b = append(c.b, p[:keep]...)
	c.dropped += int64(len(p)) - keep
	return len(p), nil
}

// Bytes is what was kept.
func (c *Buffer) Bytes() []byte { return c.b }

// Truncated reports whether anything was dropped.
func (c *Buffer) Truncated() bool { return c.dropped > 0 }

// Limit is how many bytes the Buffer keeps.
func (c *Buffer) Limit() int64 { return c.limit }

// Collect copies stdout and stderr into Buffers of limit each while wait
// runs, and returns them once both streams have ended (a local or a REST
// execution's Collect).
func Collect(stdout, stderr io.Reader, limit int64, wait func()) (out, errb *Buffer) {
	out, errb = New(limit), New(limit)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(out, stdout) }()
	go func() { defer wg.Done(); io.Copy(errb, stderr) }()
	wait()
	wg.Wait()
	return out, errb
}
