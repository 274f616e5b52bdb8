package core

import "github.com/boxlite/boxlite/abi"

// DefaultOutputLimit is how much of each output stream (stdout, stderr) a
// collected result keeps by default: Box.Run, Session cells and shell session
// commands. The rest is read and dropped, so the process never blocks, and the
// result says it was truncated. See WithOutputLimit and Command.OutputLimit.
const DefaultOutputLimit = abi.DefaultOutputLimitBytes

// capBuffer keeps the first limit bytes written to it and counts the rest.
// What a box prints is hostile input: collecting it must not grow the host
// without bound.
type capBuffer struct {
	b       []byte
	limit   int64
	dropped int64
}

// bigOutput is the size past which a capBuffer reserves its whole limit at
// once instead of doubling: a reservation costs only the pages written,
// while each doubling would leave the last buffer behind as garbage (the
// peak that counts for a 64 MiB result).
const bigOutput = 1 << 20

func newCapBuffer(limit int64) *capBuffer {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &capBuffer{limit: limit}
}

func (c *capBuffer) Write(p []byte) (int, error) {
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
func (c *capBuffer) Bytes() []byte { return c.b }

// Truncated reports whether anything was dropped.
func (c *capBuffer) Truncated() bool { return c.dropped > 0 }
