package hv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/internal/shimapi"
)

// A guest printing without end fills at most two shimapi.ConsoleLogMax files, and
// shimapi.ConsoleTail still finds the last lines across the rotation.
func TestConsoleLogCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	l, err := openConsoleLog(path)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	for i := 0; i < 5*shimapi.ConsoleLogMax/len(line); i++ {
		l.Write(line)
	}
	l.Write([]byte("last words\n"))
	l.Close()
	var total int64
	for _, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if total > 2*shimapi.ConsoleLogMax {
		t.Fatalf("console uses %d bytes on disk, cap %d", total, 2*shimapi.ConsoleLogMax)
	}
	if tail := shimapi.ConsoleTail(path, 4096); !strings.HasSuffix(tail, "last words") || len(tail) < 4000 {
		t.Fatalf("tail of %d bytes ends %q", len(tail), tail[max(len(tail)-20, 0):])
	}
}

func TestPanicLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	os.WriteFile(p, []byte("[ 1.0] boot\n[ 3.0] Kernel panic - not syncing: Out of memory: "+strings.Repeat("x", 300)+"\n[ 3.1] ---[ end Kernel panic - not syncing: Out of memory ]---\n[ 3.2] trailer\n"), 0o600)
	if got := panicLine(p); !strings.HasPrefix(got, "Kernel panic - not syncing: Out of memory: xxx") || len(got) != 203 {
		t.Fatalf("panicLine: %q (%d bytes)", got, len(got))
	}
	if got := panicLine(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Fatalf("no log: %q", got)
	}
}
