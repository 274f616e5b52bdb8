package boxlite_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// go.mod's go directive is the floor its dependencies set, no newer: a
// user's `go mod tidy` raises their go line (and the toolchain they need)
// to ours. Our own code needs go1.24 (net/http.Protocols, testing.Chdir);
// the modules we build with need 1.26.0 (golang.org/x/sys, x/net, ...).
func TestGoDirectiveIsTheFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.GoVersion}} {{.Main}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ours, floor, by string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		if f[2] == "true" {
			ours = f[1]
			continue
		}
		if semver.Compare("v"+f[1], "v"+floor) > 0 {
			floor, by = f[1], f[0]
		}
	}
	if ours == "" || floor == "" {
		t.Fatalf("no go directive found in %q", out)
	}
	if ours != floor {
		t.Fatalf("go.mod says go %s; the dependencies need go %s (%s): set it to that", ours, floor, by)
	}
}
