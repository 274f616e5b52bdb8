package restapi

import (
	"context"
	"io"
	"testing"
	"time"
)

// script is two streams that never carry data: a read of stream fd
// returns nothing for its first endAt[fd] reads, and the end after.
type script struct {
	endAt [3]int
	reads [3]int
}

func (s *script) ReadNonblock(fd int, p []byte) (int, error) {
	s.reads[fd]++
	if s.reads[fd] > s.endAt[fd] {
		return 0, io.EOF
	}
	return 0, nil
}

// TestAttachEndsWhenBothStreamsEnd: an attach whose streams both end
// sends the exit however the ends and their wake-ups interleave. It used
// to notice both ends only after one more wake-up; when that had been
// taken already (stdout's end read in one pass, stderr's in the next, one
// wake-up for both), it waited forever and the client never got its exit
// (1 exec in about 300 over REST, under load). The old loop fails all
// three cases.
func TestAttachEndsWhenBothStreamsEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		endAt  [3]int
		wakeUp int // wake-ups queued before the attach reads
	}{
		{"both in one pass", [3]int{0, 0, 0}, 0},
		{"stdout, then stderr after one wake-up", [3]int{0, 0, 1}, 1},
		{"stderr, then stdout after one wake-up", [3]int{0, 1, 0}, 1},
	} {
		e := &execution{notify: make(chan struct{}, 1), kick: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
		for range tc.wakeUp {
			e.notify <- struct{}{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, reason, ended := e.sendStreams(ctx, nil, &script{endAt: tc.endAt})
		cancel()
		if !ended {
			t.Errorf("%s: the attach ended %q, want both streams ended", tc.name, reason)
		}
	}
}
