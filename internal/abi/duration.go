package abi

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// Seconds is every duration on the wire: a JSON number of seconds, fractions
// allowed, in a field whose name ends in _secs. Each field says what 0 and
// an absent value mean.
type Seconds float64

// MinDuration is the shortest positive duration: a positive value below it
// is raised to it (a 0.1 ms timeout is 1 ms, never 0, which means none).
const MinDuration = time.Millisecond

// MaxSeconds bounds every duration on the wire (about 31.7 years, far inside
// time.Duration's 292).
const MaxSeconds = 1e9

// Duration converts s, the value of the field named what: NaN, infinities,
// negative values and values past MaxSeconds are ErrInvalidArgument naming
// the field; 0 stays 0; a positive value under MinDuration becomes it.
// This is the one place a wire duration becomes a time.Duration.
func (s Seconds) Duration(what string) (time.Duration, error) {
	f := float64(s)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v is not a number of seconds", what, f)
	case f < 0:
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v seconds is negative", what, f)
	case f > MaxSeconds:
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: %v seconds is more than %g", what, f, float64(MaxSeconds))
	case f == 0:
		return 0, nil
	}
	return max(time.Duration(math.Round(f*float64(time.Second))), MinDuration), nil
}

// Positive converts s like Duration and refuses 0 too.
func (s Seconds) Positive(what string) (time.Duration, error) {
	d, err := s.Duration(what)
	if err == nil && d == 0 {
		err = errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: must be more than 0 seconds", what)
	}
	return d, err
}

// SecondsOf is d on the wire.
func SecondsOf(d time.Duration) Seconds { return Seconds(d.Seconds()) }

// Millis is the C ABI's one convention for a function's wait argument
// (int64_t timeout_ms): how long the call may block. 0 never blocks
// (BOXLITE_AGAIN when nothing is there yet), a negative value waits as long
// as it takes, a positive one at most that many milliseconds.
type Millis int64

// Poll reports a wait of 0: the call must not block.
func (m Millis) Poll() bool { return m == 0 }

// Context bounds parent by the wait m allows: unbounded for a negative m,
// at most m milliseconds (capped at MaxSeconds) for a positive one. (A
// poll, m == 0, gives an already ended context: check Poll first.)
func (m Millis) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if m < 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, time.Duration(min(int64(m), int64(MaxSeconds)*1000))*time.Millisecond)
}

func (s Seconds) String() string { return fmt.Sprintf("%gs", float64(s)) }
