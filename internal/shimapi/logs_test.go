package shimapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConsoleTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	if got := ConsoleTail(p, 100); got != "" {
		t.Errorf("missing file: %q", got)
	}
	body := "[    0.1] early line\r\n" + strings.Repeat("filler\n", 20) + "Kernel panic - not syncing\n\xff\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got := ConsoleTail(p, 40)
	if !strings.HasSuffix(got, "Kernel panic - not syncing\n\uFFFD") || strings.HasPrefix(got, "ler") || len(got) > 45 {
		t.Errorf("ConsoleTail(40) = %q", got)
	}
	if got := ConsoleTail(p, 0); !strings.HasPrefix(got, "[    0.1] early line\nfiller") {
		t.Errorf("ConsoleTail(0) = %q", got)
	}
}
