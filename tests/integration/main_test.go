// Package integration boots real boxes (QEMU; TCG on machines without hardware
// virtualization) from the test image that `make test` builds.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

var (
	rt     *boxlite.Runtime
	shared *boxlite.Box // one box for the tests that can share it
	repo   string
)

func TestMain(m *testing.M) {
	if s := fakeQEMUScenario(); s != "" {
		fakeQEMU(s) // this process is a VMM stand-in started by a shim
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	image := os.Getenv("BOXLITE_TEST_IMAGE")
	if image == "" || os.Getenv("BOXLITE_ASSETS") == "" {
		// Never pass having tested nothing.
		fmt.Println("FAIL: integration tests need BOXLITE_TEST_IMAGE and BOXLITE_ASSETS; run them with `make test-go`")
		return 1
	}
	wd, _ := os.Getwd()
	repo = filepath.Join(wd, "..", "..")
	// A child test process (see TestBoxDiesWithCreator) shares its parent's home.
	home := os.Getenv("BOXLITE_TEST_HOME")
	child := home != ""
	if !child {
		var err error
		if home, err = os.MkdirTemp("", "bxt"); err != nil {
			fmt.Println(err)
			return 1
		}
		defer os.RemoveAll(home)
		os.Setenv("BOXLITE_TEST_HOME", home)
		os.Setenv("BOXLITE_HOME", home) // for the CLI
	}
	var err error
	if rt, err = boxlite.NewRuntime(boxlite.WithHome(home)); err != nil {
		fmt.Println(err)
		return 1
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := rt.Images().Load(ctx, image); err != nil {
		fmt.Println("load test image:", err)
		return 1
	}
	if child {
		return m.Run()
	}
	if shared, err = boxtest.CreateStarted(ctx, rt, "alpine:latest", boxlite.WithName("shared")); err != nil {
		fmt.Println("create shared box:", err)
		return 1
	}
	return m.Run()
}

func runIn(t *testing.T, b *boxlite.Box, cmd boxlite.Command) *boxlite.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := b.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("run %q: %v", cmd.Argv, err)
	}
	return res
}

func sh(script string) boxlite.Command { return boxlite.Command{Argv: []string{"sh", "-c", script}} }
