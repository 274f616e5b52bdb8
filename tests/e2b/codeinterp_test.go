package e2b

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxlite/boxlite/tests/internal/pinned"
)

// ciSDKVersion is the e2b-code-interpreter release the tests drive (`pip
// index versions e2b-code-interpreter`); its e2b is pinned to sdkVersion.
const ciSDKVersion = "2.11.5"

var loadPython sync.Once

// pythonImage loads the python:slim stand-in, the image of the
// code-interpreter templates, into the server's store.
func pythonImage(t *testing.T) {
	t.Helper()
	img := os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")
	if img == "" {
		t.Fatal("the code interpreter tests need BOXLITE_TEST_PYTHON_IMAGE (tests/images/python-rootfs.sh, with matplotlib and nodejs); run them with `make test-go`")
	}
	var err error
	loadPython.Do(func() { _, err = boxlite("image", "load", img) })
	if err != nil {
		t.Fatalf("load the python image: %v", err)
	}
}

// TestE2BCodeInterpreter runs E2B's documented code interpreter examples
// with E2B's e2b-code-interpreter SDK from PyPI.
func TestE2BCodeInterpreter(t *testing.T) {
	py := pinned.Venv(t, repo, "e2b-code-interpreter", "e2b-code-interpreter", ciSDKVersion, "e2b=="+sdkVersion)
	pythonImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, py, "codeinterp_examples.py")
	cmd.Env = sdkEnv()
	out, err := cmd.CombinedOutput()
	t.Logf("%s(%.1f s)", out, time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("E2B's code interpreter examples against boxlite serve: %v", err)
	}
}

// ciJSSDKVersion is the @e2b/code-interpreter release on npm the JS test
// drives (`npm view @e2b/code-interpreter version`); its e2b is pinned to
// jsSDKVersion.
const ciJSSDKVersion = "2.8.0"

// TestE2BCodeInterpreterJS runs E2B's documented code interpreter examples
// with E2B's @e2b/code-interpreter SDK from npm.
func TestE2BCodeInterpreterJS(t *testing.T) {
	dir := pinned.NodeProject(t, repo, "e2b-code-interpreter-"+ciJSSDKVersion, "@e2b/code-interpreter", ciJSSDKVersion, "e2b@"+jsSDKVersion)
	pythonImage(t)
	runNode(t, dir, "codeinterp_examples.mjs")
}
