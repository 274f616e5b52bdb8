package boxlite

import (
	"bytes"
	"testing"
)

// A window holding channel bytes and lane chunks credits only the
// channel's, and frees each chunk's slot once it was read through.
func TestWindowLaneChunks(t *testing.T) {
	credited, freed := 0, 0
	w := newWindow(func(n int) { credited += n })
	w.batch = 1
	w.laneFree = func() { freed++ }
	parts := []struct {
		n    int
		lane bool
	}{{100, false}, {1000, true}, {50, false}, {10, true}, {3, true}}
	var want []byte
	for i, p := range parts {
		b := bytes.Repeat([]byte{byte('a' + i)}, p.n)
		want = append(want, b...)
		if err := w.pushOf(b, p.lane); err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	buf := make([]byte, 7)
	type mark struct{ at, credited, freed int }
	var marks []mark
	for len(got) < len(want) {
		n, err := w.read(buf, false)
		if err != nil || n == 0 {
			t.Fatalf("read: %d, %v", n, err)
		}
		got = append(got, buf[:n]...)
		marks = append(marks, mark{len(got), credited, freed})
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if credited != 150 || freed != 3 {
		t.Fatalf("credited %d, freed %d; want 150, 3", credited, freed)
	}
	for _, m := range marks {
		wantFreed := 0
		for _, end := range []int{1100, 1160, 1163} {
			if m.at >= end {
				wantFreed++
			}
		}
		wantCredit := min(m.at, 100) + min(max(m.at-1100, 0), 50)
		if m.freed != wantFreed || m.credited != wantCredit {
			t.Fatalf("after %d bytes: credited %d, freed %d; want %d, %d", m.at, m.credited, m.freed, wantCredit, wantFreed)
		}
	}
	// The channel's bytes stay bounded by the window, lane bytes aside.
	if err := w.pushOf(make([]byte, 300<<10), false); err == nil {
		t.Fatal("a channel push past the window was taken")
	}
}
