package capbuf

import (
	"testing"

	"github.com/boxlite/boxlite/internal/abi"
)

func TestBuffer(t *testing.T) {
	c := New(10)
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
	if d := New(0); d.Limit() != abi.DefaultOutputLimitBytes {
		t.Fatalf("default limit %d", d.Limit())
	}
}
