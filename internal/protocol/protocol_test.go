package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/boxlite/boxlite/errdefs"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	in := Exec{Argv: []string{"sh", "-c", "echo hi"}, Env: []string{"A=1"}, Cwd: "/tmp", TimeoutMs: 1500}
	f, err := Encode(TExec, 7, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(f); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(Frame{Type: TStdout, Stream: 7, Payload: []byte("raw")}); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf)
	got, err := r.ReadFrame()
	if err != nil || got.Type != TExec || got.Stream != 7 {
		t.Fatalf("frame %+v, %v", got, err)
	}
	var out Exec
	if err := Decode(got, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Argv) != 3 || out.Argv[2] != "echo hi" || out.Cwd != "/tmp" || out.TimeoutMs != 1500 {
		t.Fatalf("decoded %+v", out)
	}
	if got, err = r.ReadFrame(); err != nil || string(got.Payload) != "raw" {
		t.Fatalf("data frame %+v, %v", got, err)
	}
	if _, err = r.ReadFrame(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

// The TTY fields are optional: a version-1 peer's Exec decodes without
// them, and a TTY request carries them.
func TestTTYFields(t *testing.T) {
	f, _ := Encode(TExec, 1, Exec{Argv: []string{"sh"}})
	var e Exec
	if err := Decode(f, &e); err != nil || e.Tty || e.Rows != 0 {
		t.Fatalf("%+v %v", e, err)
	}
	if bytes.Contains(f.Payload, []byte("tty")) {
		t.Fatalf("a non-TTY exec carries TTY fields: %q", f.Payload)
	}
	f, _ = Encode(TExec, 1, Exec{Argv: []string{"sh"}, Tty: true, Rows: 40, Cols: 100})
	if err := Decode(f, &e); err != nil || !e.Tty || e.Rows != 40 || e.Cols != 100 {
		t.Fatalf("%+v %v", e, err)
	}
	f, _ = Encode(TResize, 1, Resize{Rows: 50, Cols: 120})
	var r Resize
	if err := Decode(f, &r); err != nil || r != (Resize{50, 120}) || TResize.String() != "resize" {
		t.Fatalf("%+v %v %s", r, err, TResize)
	}
	if !(Hello{Features: []string{"x", FeatureTTY}}).Has(FeatureTTY) || (Hello{}).Has(FeatureTTY) {
		t.Fatal("Hello.Has")
	}
}

func TestFrameLimits(t *testing.T) {
	hdr := make([]byte, HeaderSize)
	binary.BigEndian.PutUint32(hdr, MaxPayload+1)
	_, err := NewReader(bytes.NewReader(hdr)).ReadFrame()
	if !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("oversized claim: %v", err)
	}
	if err := NewWriter(io.Discard).WriteFrame(Frame{Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("oversized write: %v", err)
	}
	binary.BigEndian.PutUint32(hdr, 10)
	if _, err := NewReader(bytes.NewReader(hdr)).ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: %v", err)
	}
}

func TestErrorKeepsKind(t *testing.T) {
	e := ErrorOf(errdefs.Errorf(errdefs.ErrNotFound, "exec %q", "nope"))
	err := e.Err()
	if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != `exec "nope": not found` {
		t.Fatalf("got %v", err)
	}
	if err := Decode(Frame{Type: TExec, Payload: []byte{0xc1}}, &Exec{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad body: %v", err)
	}
}

// FuzzDecode feeds arbitrary bytes to the frame reader and every body decoder:
// nothing may panic, hang or allocate beyond the frame cap.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, v := range []struct {
		t Type
		v any
	}{
		{TExec, Exec{Argv: []string{"true"}, Env: []string{"A=B"}, TimeoutMs: 5}},
		{TExec, Exec{Argv: []string{"sh"}, Tty: true, Rows: 40, Cols: 100}},
		{THello, Hello{Version: Version, KernelMs: 1.5}},
		{THello, Hello{Version: Version, Features: []string{FeatureTTY}}},
		{TResize, Resize{Rows: 40, Cols: 100}},
		{TExit, Exit{Code: 3}},
		{TCredit, Credit{Fd: 1, Bytes: 4096}},
		{TError, Error{Kind: "not_found", Message: "x"}},
	} {
		fr, _ := Encode(v.t, 1, v.v)
		buf.Reset()
		_ = w.WriteFrame(fr)
		f.Add(append([]byte(nil), buf.Bytes()...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; i < 16; i++ {
			fr, err := r.ReadFrame()
			if err != nil {
				return
			}
			_ = Decode(fr, &Exec{})
			_ = Decode(fr, &Hello{})
			_ = Decode(fr, &Exit{})
			_ = Decode(fr, &Credit{})
			_ = Decode(fr, &Error{})
			_ = Decode(fr, &Info{})
			_ = Decode(fr, &Resize{})
		}
	})
}

func TestDecodeRejectsHostileLengths(t *testing.T) {
	for name, body := range map[string][]byte{
		"str32 claims 2.9 GB": {0x81, 0xdb, 0xad, 0x30, 0x30, 0x30, 'x'},
		"array32 claims 4G":   {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},
		"deep nesting":        bytes.Repeat([]byte{0x91}, 100),
		"trailing bytes":      {0x80, 0x00},
	} {
		if err := Decode(Frame{Type: TExec, Payload: body}, &Exec{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// A guest's error message is cut and cleaned before it reaches the host's
// errors and logs.
func TestErrorMessageCapped(t *testing.T) {
	long := strings.Repeat("x", 1<<20) + "\xff"
	err := Error{Kind: "not_found", Message: long}.Err()
	if len(err.Error()) > MaxErrorMessage+64 || !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("%d bytes, kind %v", len(err.Error()), errdefs.KindOf(err))
	}
	if got := (Error{Kind: "no-such-kind", Message: "a\xffb"}).Err(); !errors.Is(got, errdefs.ErrInternal) || !utf8.ValidString(got.Error()) {
		t.Fatalf("%q kind %v", got, errdefs.KindOf(got))
	}
}

func TestHelloBound(t *testing.T) {
	h := Hello{Agent: strings.Repeat("a", 1<<20), Kernel: "k\xff", Features: make([]string, 1000), KernelMs: -5, Layers: -1}
	h.Bound()
	if len(h.Agent) != maxHelloString || !utf8.ValidString(h.Kernel) || len(h.Features) != maxHelloFeatures || h.KernelMs != 0 || h.Layers != 0 {
		t.Fatalf("bounded hello: agent %d bytes, kernel %q, %d features, kernel_ms %v, layers %d", len(h.Agent), h.Kernel, len(h.Features), h.KernelMs, h.Layers)
	}
	// NaN and infinities (msgpack carries them; JSON of a paused record
	// or of box info cannot) become 0.
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		h := Hello{KernelMs: v, ReadyMs: v}
		h.Bound()
		if h.KernelMs != 0 || h.ReadyMs != 0 {
			t.Errorf("hello timings %v bounded to %v, %v", v, h.KernelMs, h.ReadyMs)
		}
	}
}

// A Writer reuses its join buffer: frames of every size after one another
// arrive whole, and WriteHeaded sends a payload read after the header's room.
func TestWriterReusesBuffer(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	sizes := []int{MaxChunk, 3, 0, MaxChunk + 1000, 17, MaxChunk - HeaderSize}
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		if err := w.WriteFrame(Frame{Type: TStdout, Stream: uint32(i), Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	headed := append(make([]byte, HeaderSize), "in place"...)
	if err := w.WriteHeaded(TStderr, 9, headed); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHeaded(TStderr, 9, make([]byte, HeaderSize-1)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a buffer shorter than a header: %v", err)
	}
	r := NewReader(&buf)
	for i, n := range sizes {
		f, err := r.ReadFrame()
		if err != nil || f.Stream != uint32(i) || !bytes.Equal(f.Payload, bytes.Repeat([]byte{byte('a' + i)}, n)) {
			t.Fatalf("frame %d: stream %d, %d bytes, %v; want %d bytes of %c", i, f.Stream, len(f.Payload), err, n, 'a'+i)
		}
	}
	f, err := r.ReadFrame()
	if err != nil || f.Type != TStderr || f.Stream != 9 || string(f.Payload) != "in place" {
		t.Fatalf("headed frame %+v, %v", f, err)
	}
	if cap(w.buf) > keptBuffer {
		t.Fatalf("writer kept a %d-byte buffer, at most %d", len(w.buf), keptBuffer)
	}
}

// Frames written from many goroutines arrive whole: the Writer serialises
// them (its join buffer is shared).
func TestWriterConcurrent(t *testing.T) {
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	const writers, frames = 8, 100
	go func() {
		var wg sync.WaitGroup
		for g := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range frames {
					p := bytes.Repeat([]byte{byte(g)}, (i*997)%MaxChunk)
					w.WriteFrame(Frame{Type: TStdout, Stream: uint32(g), Payload: p})
				}
			}()
		}
		wg.Wait()
		pw.Close()
	}()
	r := NewReader(pr)
	n := 0
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if len(f.Payload) > 0 && (f.Payload[0] != byte(f.Stream) || f.Payload[len(f.Payload)-1] != byte(f.Stream)) {
			t.Fatalf("frame %d of stream %d holds another stream's bytes", n, f.Stream)
		}
		n++
	}
	if n != writers*frames {
		t.Fatalf("%d frames, want %d", n, writers*frames)
	}
}

func TestDetachIDs(t *testing.T) {
	for _, ok := range []string{"a", "exec-0123abcd", "A_b-9", strings.Repeat("x", MaxDetachID)} {
		if !ValidDetachID(ok) || CheckDetachID("t", ok) != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "../x", "a b", "a/b", "é", "a\x00", strings.Repeat("x", MaxDetachID+1)} {
		if ValidDetachID(bad) || !errors.Is(CheckDetachID("t", bad), errdefs.ErrInvalidArgument) {
			t.Errorf("%q accepted", bad)
		}
	}
}
