package protocol

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

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

// Writer serialises frames onto w. It is not safe for concurrent use; callers
// that share a connection serialise with a mutex.
type Writer struct {
	w   io.Writer
	hdr [HeaderSize]byte
}

func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes f in one Write call when w is unbuffered (header and payload
// are joined), so frames from different goroutines never interleave mid-frame
// as long as calls are serialised.
func (w *Writer) WriteFrame(f Frame) error {
	if len(f.Payload) > MaxPayload {
		return errdefs.Errorf(errdefs.ErrLimit, "frame %s: payload of %d bytes exceeds %d", f.Type, len(f.Payload), MaxPayload)
	}
	buf := make([]byte, HeaderSize+len(f.Payload))
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(f.Payload)))
	buf[4] = byte(f.Type)
	binary.BigEndian.PutUint32(buf[5:9], f.Stream)
	copy(buf[HeaderSize:], f.Payload)
	_, err := w.w.Write(buf)
	return err
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
