package boxlite

import (
	"bytes"
	"io"
	"testing"
)

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
