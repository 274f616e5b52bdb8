// Package session runs persistent sessions in a box (DESIGN.md, decision 9):
// a long-lived Python interpreter that runs cells and keeps their state
// (Python), or a long-lived shell that runs commands and keeps its working
// directory and variables (Shell).
//
// A session needs four things of a box, the Process interface: start a
// process with argv, env, cwd and user and its stdin open; read its stdout
// and stderr; signal it or its process group; wait for it. core adapts an
// Execution to it (Box.NewPythonSession, Box.NewShellSession); the tests
// use local processes. One supervisor (supervisor.go) keeps the process of
// every kind: it starts it (ensure), replaces one that died (restart),
// starts a fresh one on Reset, stops it on Close, and lets one cell or
// command run at a time (busy). The Python driver's protocol is in
// driver.go and driver.py, a cell's output stream in cell.go, the shell's
// marker stream in marker.go.
package session

import (
	"errors"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"

	"github.com/boxlite/boxlite/internal/abi"
	"github.com/boxlite/boxlite/internal/protocol"
)

// ErrRestarted is wrapped, with ErrTimeout, by the error of a cell or
// command that did not stop when interrupted: its interpreter or shell was
// killed and started again, and the session's state is gone.
var ErrRestarted = errors.New("session restarted")

const (
	defaultGrace    = abi.DefaultSessionGrace
	startTimeout    = 2 * time.Minute
	stderrTailBytes = 4 << 10
)

// Options configures a session (boxlite.SessionOptions).
type Options struct {
	// Python is the interpreter of a Python session. Default: the first of
	// /usr/local/bin/python3, python3 and python (on the box's PATH) that exists.
	Python string
	// Shell is the shell of a shell session. Default: /bin/sh.
	Shell string
	Env   map[string]string // added to the image's and the box's environment
	Cwd   string            // default: the box's, else the image's working directory
	User  string            // default: the box's, else the image's user
	// Grace is how long an interrupted cell or command has to stop before its
	// interpreter or shell is killed and restarted (losing the session's
	// state). Default 3s.
	Grace time.Duration
	// OutputLimit caps how many bytes of each stream a cell's result or a
	// shell command's result keeps; the rest is dropped and the result is
	// marked truncated. Default: the runtime's (DefaultOutputLimit, 64 MiB).
	OutputLimit int64
	// Name makes the session's process outlive its client: Close leaves it
	// running in the box, and a later session of the same kind and name in
	// the same box (from any process, after a pause, in a fork of the box)
	// takes it over with its state instead of starting a new one. While a
	// client holds it, another gets ErrAlreadyExists. Reset and a killed or
	// restarted process start a fresh one under the name. 1 to MaxNameLen of
	// [A-Za-z0-9_-]. Default: none (the process ends with its session).
	Name string
}

// MaxNameLen bounds Options.Name: with its kind's prefix it is an
// execution id (at most 64 bytes).
const MaxNameLen = 48

// qualified is the name of the session's process as the Starter gets it:
// its kind, a dash and Options.Name ("python-main", "shell-main"), so that
// sessions of two kinds never take each other's process.
func (o Options) qualified(kind string) Options {
	if o.Name != "" {
		o.Name = kind + "-" + o.Name
	}
	return o
}

func (o Options) grace() time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return defaultGrace
}

func (o Options) check(what string) error {
	if o.Grace < 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: negative grace period", what)
	}
	if o.OutputLimit < 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: negative output limit", what)
	}
	if o.Name != "" && !validName(o.Name) {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: name %q: want 1 to %d of [A-Za-z0-9_-]", what, o.Name, MaxNameLen)
	}
	return checkEnv(what, o.Env)
}

// checkEnv refuses env keys no environment can hold.
func checkEnv(what string, env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: env key %q is invalid", what, k)
		}
		if strings.ContainsRune(v, 0) {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: env %s contains a NUL byte", what, k)
		}
	}
	return nil
}

// validName: a name the box can hold as part of an execution id.
func validName(s string) bool {
	return len(s) <= MaxNameLen && protocol.ValidDetachID(s)
}
