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

func TestLockContent(t *testing.T) {
	for _, ended := range []bool{false, true} {
		if pid, e, ok := ParseLockContent(LockContent(4242, ended)); !ok || pid != 4242 || e != ended {
			t.Errorf("ended %v: %d %v %v", ended, pid, e, ok)
		}
	}
	for _, bad := range []string{"", "x\n", "12 stopping\n", "-3\n", "1 ended extra\n", strings.Repeat("9", 40)} {
		if _, _, ok := ParseLockContent([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
