// Package cmdrun runs a program for a test, as a user would from a shell:
// its stdout, stderr and exit code.
package cmdrun

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Cmd is one run: Env replaces the environment when not nil; Dir and
// Stdin are optional. Timeout bounds it (default a minute).
type Cmd struct {
	Env     []string
	Dir     string
	Stdin   string
	Timeout time.Duration
}

// Run runs name with args and returns what it wrote and its exit code; a
// program that cannot be started (or is killed by the timeout) fails t.
func (c Cmd) Run(t testing.TB, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir, cmd.Stdin = c.Env, c.Dir, strings.NewReader(c.Stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ctx.Err() != nil) {
		t.Fatalf("%s %q: %v\n%s%s", name, args, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// Must is Run that fails t when the program exits non-zero; it returns stdout.
func (c Cmd) Must(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, errOut, code := c.Run(t, name, args...)
	if code != 0 {
		t.Fatalf("%s %q: exit %d\n%s%s", name, args, code, out, errOut)
	}
	return out
}
