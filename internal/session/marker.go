package session

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/boxlite/boxlite/internal/capbuf"
)

// The marker stream. After each command a shell session's shell prints a
// marker line, "TOKEN SEQ STATUS" on stdout and "TOKEN SEQ" on stderr,
// where TOKEN is random per shell and never sent to a command (it travels
// only on the shell's stdin, which commands do not read: they get
// /dev/null): what precedes the markers is the command's output, even
// without a trailing newline.

// markerStream is one output stream of the shell, cut at the markers. The
// reader holds at most maxMarkerPending bytes that no command has taken yet
// (then it stops reading, and the shell blocks as on a full pipe); a command
// keeps at most limit bytes of its output and drops the rest.
type markerStream struct {
	token []byte
	limit int64

	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte
	scanned   int   // buf[:scanned] holds no whole token
	err       error // the stream ended
	abandoned bool  // the shell was dropped: read and discard
}

const maxMarkerPending = 1 << 20

func newMarkerStream(token string, limit int64) *markerStream {
	m := &markerStream{token: []byte(token), limit: limit}
	m.cond = sync.NewCond(&m.mu)
	return m
}

func (m *markerStream) run(r io.Reader) {
	b := make([]byte, 64<<10)
	for {
		n, err := r.Read(b)
		m.mu.Lock()
		if !m.abandoned {
			m.buf = append(m.buf, b[:n]...)
		}
		if err != nil {
			m.err = err
		}
		m.cond.Broadcast()
		for len(m.buf) >= maxMarkerPending && m.err == nil && !m.abandoned {
			m.cond.Wait()
		}
		m.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// abandon lets the reader drain the stream without keeping anything.
func (m *markerStream) abandon() {
	m.mu.Lock()
	m.abandoned, m.buf, m.scanned = true, nil, 0
	m.mu.Unlock()
	m.cond.Broadcast()
}

// next returns the output before the marker of seq and the marker's fields
// (token excluded: seq, then the status on stdout), with truncated set when
// more than limit (0: the stream's) came. Output after a marker belongs to
// the next command. An error means the stream ended first; the output so far
// is returned with it.
func (m *markerStream) next(seq int, limit int64) (out []byte, fields []string, truncated bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit == 0 {
		limit = m.limit
	}
	o := capbuf.New(limit)
	defer func() { out, truncated = o.Bytes(), o.Truncated() }()
	for {
		if i := bytes.Index(m.buf[m.scanned:], m.token); i >= 0 {
			i += m.scanned
			if j := bytes.IndexByte(m.buf[i:], '\n'); j >= 0 {
				fields := strings.Fields(string(m.buf[i+len(m.token) : i+j]))
				o.Write(m.buf[:i])
				m.buf = m.buf[i+j+1:]
				m.scanned = 0
				m.cond.Broadcast()
				if len(fields) >= 1 && fields[0] == strconv.Itoa(seq) {
					return nil, fields, false, nil
				}
				continue // a marker of an earlier command: not ours
			}
			if len(m.buf)-i > maxMarkerPending/2 { // a "marker" line that never ends is output
				m.scanned = i + 1
				continue
			}
		} else if keep := len(m.token) - 1; len(m.buf) > keep {
			// No whole token here: all but a possible token's start is output.
			o.Write(m.buf[:len(m.buf)-keep])
			m.buf = append([]byte(nil), m.buf[len(m.buf)-keep:]...)
			m.scanned = 0
			m.cond.Broadcast()
		}
		if m.err != nil {
			o.Write(m.buf)
			m.buf = nil
			return nil, nil, false, m.err
		}
		m.cond.Wait()
	}
}
