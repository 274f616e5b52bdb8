package rest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

// TestRestCapabilities: BoxLite's create field advanced.capabilities
// reaches the box's processes (CapEff), an unknown name is a 400 naming
// it, and what BoxLite's REST create cannot carry (security options) is
// refused by our client, never dropped.
func TestRestCapabilities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	status, body := callJSON(t, "POST", "/v1/boxes", map[string]any{"image": "alpine:latest",
		"advanced": map[string]any{"capabilities": map[string]any{"add": []string{"CAP_NO_SUCH_THING"}}}})
	if status != 400 || !strings.Contains(string(body), "NO_SUCH_THING") {
		t.Errorf("an unknown capability: %d %s, want 400 naming it", status, body)
	}
	status, body = callJSON(t, "POST", "/v1/boxes", map[string]any{"image": "alpine:latest",
		"advanced": map[string]any{"capabilities": map[string]any{"add": make([]string, 65)}}})
	if status != 413 {
		t.Errorf("65 names to add: %d %s, want 413", status, body)
	}

	c := restClient(t)
	on := true
	if _, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Advanced: &abi.Advanced{Security: &abi.Security{SeccompEnabled: &on}}}); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("security options on a REST runtime: %v, want unsupported", err)
	}
	mem := 256
	b, err := c.Create(ctx, abi.BoxOptions{Image: "alpine:latest", Name: "rest-caps", MemoryMiB: &mem,
		Advanced: &abi.Advanced{Capabilities: &abi.Capabilities{Add: []string{"net_admin"}, Drop: []string{"CAP_CHOWN"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	res, err := b.Run(ctx, boxlite.Command{Argv: []string{"sh", "-c", "grep CapEff /proc/self/status"}})
	if err != nil || res.Code != 0 {
		t.Fatalf("CapEff: %+v %v", res, err)
	}
	hex := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(res.Stdout)), "CapEff:"))
	eff, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("CapEff %q: %v", res.Stdout, err)
	}
	const chown, netAdmin = 0, 12
	if eff&(1<<netAdmin) == 0 || eff&(1<<chown) != 0 {
		t.Errorf("CapEff %#x: want NET_ADMIN (bit 12) added and CHOWN (bit 0) dropped", eff)
	}
}
