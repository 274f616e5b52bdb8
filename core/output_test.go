package core

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

func TestCapBuffer(t *testing.T) {
	c := newCapBuffer(10)
	c.Write([]byte("12345"))
	if c.Truncated() {
		t.Fatal("truncated before the limit")
	}
	if n, _ := c.Write([]byte("6789abcdef")); n != 10 {
		t.Fatalf("Write returned %d, want all 10 (the rest is dropped, not refused)", n)
	}
	if string(c.Bytes()) != "123456789a" || !c.Truncated() {
		t.Fatalf("kept %q truncated=%v", c.Bytes(), c.Truncated())
	}
	if d := newCapBuffer(0); d.limit != DefaultOutputLimit {
		t.Fatalf("default limit %d", d.limit)
	}
}

// A shell command printing more than the limit keeps the limit's worth,
// says so, and the session goes on (markers after the flood are found).
func TestShellSessionOutputLimit(t *testing.T) {
	s, err := newShellSession(context.Background(), localStarter(t), SessionOptions{Grace: 500 * time.Millisecond, OutputLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Exec(context.Background(), []string{"sh", "-c", "head -c 5000000 /dev/zero; head -c 3000000 /dev/zero >&2; echo tail"}, nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != 1<<20 || !r.StdoutTruncated || len(r.Stderr) != 1<<20 || !r.StderrTruncated {
		t.Fatalf("stdout %d truncated=%v, stderr %d truncated=%v", len(r.Stdout), r.StdoutTruncated, len(r.Stderr), r.StderrTruncated)
	}
	if r := shExec(t, s, "echo", "next"); string(r.Stdout) != "next\n" || r.StdoutTruncated {
		t.Fatalf("next command: %q truncated=%v", r.Stdout, r.StdoutTruncated)
	}
}

func TestSessionCellOutputLimit(t *testing.T) {
	s := newTestSession(t, SessionOptions{OutputLimit: 1 << 20})
	r := run(t, s, "import sys\nsys.stdout.write('x' * 3000000)\nsys.stdout.flush()\nprint('err', file=sys.stderr)")
	if len(r.Stdout) != 1<<20 || !r.StdoutTruncated || r.StderrTruncated || !bytes.Equal(r.Stderr, []byte("err\n")) {
		t.Fatalf("stdout %d truncated=%v, stderr %q truncated=%v", len(r.Stdout), r.StdoutTruncated, r.Stderr, r.StderrTruncated)
	}
	if r := run(t, s, "print(1)"); string(r.Stdout) != "1\n" || r.StdoutTruncated {
		t.Fatalf("next cell: %+v", r)
	}
}

// A window returns credit in batches of creditBatch, never more than was
// read, and none once the stream has ended.
func TestWindowCreditBatches(t *testing.T) {
	var credits []int
	w := newWindow(func(n int) { credits = append(credits, n) })
	chunk := bytes.Repeat([]byte{'x'}, 10000)
	p := make([]byte, 4096)
	read := 0
	for read < 3*creditBatch {
		if err := w.push(chunk); err != nil {
			t.Fatal(err)
		}
		for w.pending() {
			n, err := w.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			read += n
		}
	}
	sum := 0
	for _, c := range credits {
		if c < creditBatch {
			t.Fatalf("credit of %d bytes, batches are at least %d", c, creditBatch)
		}
		sum += c
	}
	if sum > read || read-sum >= creditBatch {
		t.Fatalf("credited %d of %d bytes read (batch %d)", sum, read, creditBatch)
	}
	w.push([]byte("tail"))
	w.close(io.EOF)
	before := len(credits)
	if n, err := w.Read(p); n != 4 || err != nil {
		t.Fatalf("read after close: %d, %v", n, err)
	}
	if len(credits) != before {
		t.Fatal("credit after the stream ended")
	}
}
