package errdefs

import (
	"errors"
	"testing"
)

// An error rebuilt from across an edge keeps its kind and its lines, not
// the control characters a hostile guest put in it.
func TestNewTakesOutControlCharacters(t *testing.T) {
	err := New(KindBootFailed, "boot: no hello\n--- console ---\n\x1b]52;c;cHduZWQ=\x07\x1b[2Jroot# \r")
	if !errors.Is(err, ErrBootFailed) {
		t.Fatalf("kind lost: %v", err)
	}
	if want := "boot: no hello\n--- console ---\n?]52;c;cHduZWQ=??[2Jroot# "; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}
