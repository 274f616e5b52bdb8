package readme

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/cmdrun"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
	"github.com/boxlite/boxlite/tests/internal/readme"
)

// The blocks boot boxes: a deadline for each program a block is or makes.
const stepTimeout = 5 * time.Minute

var (
	regOnce sync.Once
	regSrv  *httptest.Server
	regErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeFragmentHome()
	if regSrv != nil {
		regSrv.Close()
	}
	os.Exit(code)
}

// images are the test images' archives (make test-go sets them).
func images(t *testing.T) (alpine, python string) {
	t.Helper()
	alpine, python = os.Getenv("BOXLITE_TEST_IMAGE"), os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if alpine == "" || python == "" {
		t.Fatal("needs BOXLITE_TEST_IMAGE and BOXLITE_TEST_PYTHON_IMAGE (the test images' archives); run with `make test-go`")
	}
	if _, err := os.Stat(filepath.Join(readme.Root(), "build", "boxlite")); err != nil {
		t.Fatalf("needs the build (make build): %v", err)
	}
	return alpine, python
}

// mirror is the docker.io mirror the blocks that pull use, as the README
// says a host without a registry does (BOXLITE_REGISTRY_MIRRORS): a registry
// on loopback, in this process, serving the python test image as
// library/python:slim.
func mirror(t *testing.T) string {
	t.Helper()
	_, python := images(t)
	regOnce.Do(func() {
		regSrv = boxtest.NewRegistry()
		_, regErr = boxtest.PushImage(python, strings.TrimPrefix(regSrv.URL, "http://"), "library/python:slim")
	})
	if regErr != nil {
		t.Fatal(regErr)
	}
	return "docker.io=" + regSrv.URL
}

// userEnv is a user's environment: no BOXLITE_* variable of the test's
// (but the host's choice of accelerator and VMM), the home given, the
// build's programs on PATH, and the mirror.
func userEnv(t *testing.T, home string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BOXLITE_") && !strings.HasPrefix(kv, "BOXLITE_ACCEL=") && !strings.HasPrefix(kv, "BOXLITE_QEMU=") {
			continue
		}
		if strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + filepath.Join(readme.Root(), "build") + ":" + strings.TrimPrefix(kv, "PATH=")
		}
		env = append(env, kv)
	}
	return append(env, "BOXLITE_HOME="+home, "BOXLITE_REGISTRY_MIRRORS="+mirror(t))
}

// blocks(t)(readme.Named(name)) is the blocks marked name, failing t when
// there are none (TestEveryBlockIsRun finds a block's test by that call).
func blocks(t *testing.T) func([]readme.Block, error) []readme.Block {
	return func(bs []readme.Block, err error) []readme.Block {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
}

// runLogged runs a program of a block and logs what it wrote and how long it took.
func runLogged(t *testing.T, c cmdrun.Cmd, what string, name string, args ...string) (out string, code int) {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = stepTimeout
	}
	start := time.Now()
	stdout, stderr, code := c.Run(t, name, args...)
	t.Logf("%s: exit %d in %v\n%s%s", what, code, time.Since(start).Round(time.Millisecond), tail(stdout), tail(stderr))
	return stdout, code
}

// tail is the end of a program's output, for the log.
func tail(s string) string {
	const max = 4000
	if len(s) <= max {
		return s
	}
	return "[...]" + s[len(s)-max:]
}
