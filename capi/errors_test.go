package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

// Every kind has its C code, and no error ever comes back as BOXLITE_OK.
func TestEveryKindHasItsCode(t *testing.T) {
	if len(codes) != len(errdefs.Kinds) {
		t.Fatalf("%d codes for %d kinds", len(codes), len(errdefs.Kinds))
	}
	for _, k := range errdefs.Kinds {
		c, ok := codes[k.Kind]
		if !ok || int(c) != k.Code {
			t.Errorf("kind %s: C code %d (present %v), want %d", k.Kind, int(c), ok, k.Code)
		}
		if got := int(status(fmt.Errorf("x: %w", k.Err), nil)); got != k.Code {
			t.Errorf("status of a %s error = %d, want %d", k.Kind, got, k.Code)
		}
	}
	if got := int(status(errors.New("no kind"), nil)); got != internalCode() {
		t.Errorf("status of an error without a kind = %d, want internal", got)
	}
}

func internalCode() int {
	k, _ := errdefs.Lookup(errdefs.KindInternal)
	return k.Code
}
