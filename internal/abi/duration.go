package abi

import (
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

// OptionalSeconds is an optional duration field: nil when absent.
func OptionalSeconds(d time.Duration) *Seconds {
	s := SecondsOf(d)
	return &s
}

// Millis is the C ABI's one convention for a function's wait argument
// (int64_t timeout_ms): how long the call may block. 0 never blocks
// (BOXLITE_AGAIN when nothing is there yet), a negative value waits as long
// as it takes, a positive one at most that many milliseconds.
type Millis int64

// Wait returns the deadline's duration and whether the call may block at all
// and whether it is bounded.
func (m Millis) Wait() (d time.Duration, block, bounded bool) {
	switch {
	case m == 0:
		return 0, false, true
	case m < 0:
		return 0, true, false
	}
	return time.Duration(min(int64(m), int64(MaxSeconds)*1000)) * time.Millisecond, true, true
}

func (s Seconds) String() string { return fmt.Sprintf("%gs", float64(s)) }
