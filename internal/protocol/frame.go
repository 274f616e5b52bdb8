package protocol

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/boxlite/boxlite/errdefs"
)

// Frame layout: | payload length u32 | type u8 | stream u32 | payload |, big endian.
// The header is fixed binary so that the shim can route frames by stream id
// without decoding their bodies.
const (
	HeaderSize = 9
	// MaxPayload caps what a frame may claim; a peer that claims more is broken
	// or hostile and the connection is dropped.
	MaxPayload = 1 << 20
	// MaxChunk is the largest data chunk a sender puts in one frame.
	MaxChunk = 64 << 10
)

// Frame is one unit on the wire. Stream 0 carries connection-level messages
// (hello, shutdown); every exec or request has its own stream id chosen by the host.
type Frame struct {
	Type    Type
	Stream  uint32
	Payload []byte
}

// Writer serialises frames onto w, each in one Write call when w is
// unbuffered, so frames from different goroutines never interleave.
type Writer struct {
	mu  sync.Mutex // for buf, and the order of frames
	w   io.Writer
	buf []byte // joins header and payload; kept between frames up to keptBuffer
}

// keptBuffer is the largest join buffer a Writer keeps for the next frame:
// a data frame's worth. Larger frames (a big exec request) get a buffer of
// their own.
const keptBuffer = HeaderSize + MaxChunk

func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes f in one Write call when w is unbuffered (header and
// payload are joined).
func (w *Writer) WriteFrame(f Frame) error { return w.WriteFrames(f) }

// WriteFrames writes fs in one Write call when w is unbuffered: a stream's
// frames that are ready together (the agent's Started and Exit of a quick
// process) cost the channel one write instead of one each.
func (w *Writer) WriteFrames(fs ...Frame) error {
	n := 0
	for _, f := range fs {
		if len(f.Payload) > MaxPayload {
			return errdefs.Errorf(errdefs.ErrLimit, "frame %s: payload of %d bytes exceeds %d", f.Type, len(f.Payload), MaxPayload)
		}
		n += HeaderSize + len(f.Payload)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := w.buf
	switch {
	case n <= cap(buf):
	case n <= keptBuffer:
		buf = make([]byte, keptBuffer)
		w.buf = buf
	default:
		buf = make([]byte, n)
	}
	buf = buf[:0]
	for _, f := range fs {
		var hdr [HeaderSize]byte
		putHeader(hdr[:], f.Type, f.Stream, len(f.Payload))
		buf = append(append(buf, hdr[:]...), f.Payload...)
	}
	_, err := w.w.Write(buf)
	return err
}

// WriteHeaded writes a frame whose payload is b[HeaderSize:], filling in
// b[:HeaderSize] with its header: a sender that reads its data into a buffer
// after HeaderSize free bytes sends it in one Write without a copy.
func (w *Writer) WriteHeaded(t Type, stream uint32, b []byte) error {
	if len(b) < HeaderSize {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "frame %s: %d bytes leave no room for its header", t, len(b))
	}
	if len(b)-HeaderSize > MaxPayload {
		return errdefs.Errorf(errdefs.ErrLimit, "frame %s: payload of %d bytes exceeds %d", t, len(b)-HeaderSize, MaxPayload)
	}
	putHeader(b, t, stream, len(b)-HeaderSize)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(b)
	return err
}

// putHeader writes the header of a frame with n payload bytes into b.
func putHeader(b []byte, t Type, stream uint32, n int) {
	binary.BigEndian.PutUint32(b[0:4], uint32(n))
	b[4] = byte(t)
	binary.BigEndian.PutUint32(b[5:9], stream)
}

// Reader reads frames from r.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderSize]byte
}

func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// ReadFrame returns the next frame. It returns io.EOF on a clean end between
// frames, io.ErrUnexpectedEOF inside one, and an ErrLimit error for a frame
// claiming more than MaxPayload (the stream cannot be resynchronised after that).
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(r.hdr[0:4])
	f := Frame{Type: Type(r.hdr[4]), Stream: binary.BigEndian.Uint32(r.hdr[5:9])}
	if n > MaxPayload {
		return Frame{}, errdefs.Errorf(errdefs.ErrLimit, "frame %s on stream %d claims %d bytes, limit %d", f.Type, f.Stream, n, MaxPayload)
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r.r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}
