package core

import "bytes"

// DefaultOutputLimit is how much of each output stream (stdout, stderr) a
// collected result keeps by default: Box.Run, Session cells and shell session
// commands. The rest is read and dropped, so the process never blocks, and the
// result says it was truncated. See WithOutputLimit and Command.OutputLimit.
const DefaultOutputLimit int64 = 64 << 20

// capBuffer keeps the first limit bytes written to it and counts the rest.
// What a box prints is hostile input: collecting it must not grow the host
// without bound.
type capBuffer struct {
	buf     bytes.Buffer
	limit   int64
	dropped int64
}

func newCapBuffer(limit int64) *capBuffer {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &capBuffer{limit: limit}
}

func (c *capBuffer) Write(p []byte) (int, error) {
	room := c.limit - int64(c.buf.Len())
	keep := int64(len(p))
	if keep > room {
		keep = max(room, 0)
	}
	c.buf.Write(p[:keep])
	c.dropped += int64(len(p)) - keep
	return len(p), nil
}

// Bytes is what was kept.
func (c *capBuffer) Bytes() []byte { return c.buf.Bytes() }

// Truncated reports whether anything was dropped.
func (c *capBuffer) Truncated() bool { return c.dropped > 0 }
