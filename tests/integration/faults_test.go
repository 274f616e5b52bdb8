package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// A box that runs out of memory loses the process that asked for it (the
// guest's OOM killer; the agent, PID 1, is never its choice), and goes on.
func TestGuestOOM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := boxtest.CreateStarted(ctx, rt, "alpine:latest", core.WithMemoryMiB(128))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), true)
	// A string that doubles until the guest has no memory left for it.
	res, err := b.Run(ctx, sh(`awk 'BEGIN { s = "x"; while (1) s = s s }'`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != int(syscall.SIGKILL) && res.Code == 0 {
		t.Fatalf("a process growing without end in a 128 MiB box: exit %+v", res.ExitStatus)
	}
	t.Logf("OOM: exit %+v", res.ExitStatus)
	if res := runIn(t, b, sh("echo still here")); string(res.Stdout) != "still here\n" {
		t.Fatalf("after the OOM: %q", res.Stdout)
	}
}
