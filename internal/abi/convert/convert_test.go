package convert

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// Box info on the wire has seconds, never a Go duration's nanoseconds.
func TestBoxInfoUnits(t *testing.T) {
	info := boxlite.BoxInfo{ID: "abc", Image: "alpine:latest", State: boxlite.StateStopped,
		CreatedAt: time.Unix(1700000000, 0), Config: boxlite.BoxConfig{Image: "alpine:latest", BootTimeout: 90 * time.Second}}
	b, err := json.Marshal(BoxInfo(info))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"boot_timeout_secs":90`, `"created_at_unix":1700000000`, `"hostname":"boxlite"`, `"mode":"enabled"`} {
		if !strings.Contains(s, want) {
			t.Errorf("info lacks %s: %s", want, s)
		}
	}
	if strings.Contains(s, "90000000000") || strings.Contains(s, `"boot_timeout"`) {
		t.Errorf("nanoseconds on the wire: %s", s)
	}
}

// A zero or negative boot timeout is refused the same way whichever SDK sent it.
func TestBoxOptionsDurations(t *testing.T) {
	for _, secs := range []abi.Seconds{0, -1} {
		_, err := BoxOptions(abi.BoxOptions{Image: "x", BootTimeoutSecs: &secs})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "boot_timeout_secs") {
			t.Errorf("boot_timeout_secs %v: %v", secs, err)
		}
	}
	if _, err := Command(abi.Command{Argv: []string{"true"}, TimeoutSecs: -2}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("negative command timeout: %v", err)
	}
	c, err := Command(abi.Command{Argv: []string{"true"}, TimeoutSecs: 0.0004})
	if err != nil || c.Timeout != time.Millisecond {
		t.Errorf("a 0.4 ms timeout = %v, %v; want 1ms", c.Timeout, err)
	}
}

// An import's options are box options without the archive's image and the
// import's own name.
func TestImportOptions(t *testing.T) {
	for _, o := range []abi.BoxOptions{{Image: "alpine:latest"}, {Name: "x"}} {
		if _, err := ImportOptions(o); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	mem, keep := 256, false
	opts, err := ImportOptions(abi.BoxOptions{MemoryMiB: &mem, AutoRemove: &keep})
	if err != nil || len(opts) != 2 {
		t.Fatalf("%d options, %v", len(opts), err)
	}
}
