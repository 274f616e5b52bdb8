package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

func TestKindsTable(t *testing.T) {
	codes, names, classes := map[int]bool{}, map[Kind]bool{}, map[string]bool{}
	for _, k := range Kinds {
		if k.Code < 1 || k.Code > 99 || codes[k.Code] {
			t.Errorf("%s: code %d is out of 1-99 or taken", k.Kind, k.Code)
		}
		if names[k.Kind] || classes[k.Python] || k.Python == "" || k.Doc == "" || k.Err == nil {
			t.Errorf("%s: duplicate or incomplete spec %+v", k.Kind, k)
		}
		codes[k.Code], names[k.Kind], classes[k.Python] = true, true, true
		err := fmt.Errorf("op: %w", k.Err)
		if KindOf(err) != k.Kind {
			t.Errorf("KindOf(%v) = %s, want %s", err, KindOf(err), k.Kind)
		}
		if r := New(k.Kind, "msg"); !errors.Is(r, k.Err) || r.Error() != "msg" {
			t.Errorf("New(%s) = %v, not a %v", k.Kind, r, k.Err)
		}
	}
	if KindOf(errors.New("plain")) != KindInternal || !errors.Is(New("no_such_kind", "m"), ErrInternal) {
		t.Error("an error without a known kind is not internal")
	}
}
