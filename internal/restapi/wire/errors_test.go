package wire

import (
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// TestKindOfCodeRoundTrips: every kind the server answers comes back to the
// same kind in a client, from the one table.
func TestKindOfCodeRoundTrips(t *testing.T) {
	for _, k := range errdefs.Kinds {
		a, ok := KindAnswers[k.Kind]
		if !ok {
			t.Fatalf("kind %s has no answer", k.Kind)
		}
		if got := KindOfCode(a.Code); got != k.Kind {
			t.Errorf("code %q of kind %s reads back as %s", a.Code, k.Kind, got)
		}
	}
	if KindOfCode("no_such_code") != errdefs.KindInternal {
		t.Error("an unknown code is not internal")
	}
}
