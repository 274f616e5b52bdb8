package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/internal/safetext"
)

// JSON that `info` and `import` print carries no control character a
// terminal would act on, and decodes to the value as it was.
func TestEscapeJSON(t *testing.T) {
	in := map[string]string{"image": "\x1b]0;pwned\x07alp\u009bine\x7f\u202e", "plain": "alpine:latest"}
	b, _ := json.Marshal(in)
	out := escapeJSON(string(b))
	if strings.IndexFunc(out, safetext.Unsafe) >= 0 || strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("escaped JSON still has control characters: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil || back["image"] != in["image"] || back["plain"] != in["plain"] {
		t.Fatalf("round trip: %q %v", back, err)
	}
}
