package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/cmdrun"
)

// The command line's conventions, on the built binary (as a user types
// them): help on stdout with exit 0 for every command, a version, and a
// bad flag or argument refused in one line with docker's 125.

// cliBinary is the boxlite built for these tests, once.
var cliBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "boxlite-cli-test")
	if err != nil {
		panic(err)
	}
	cliBinary = filepath.Join(dir, "boxlite")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	build := exec.CommandContext(ctx, "go", "build", "-o", cliBinary, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	err = build.Run()
	cancel()
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		os.Stderr.WriteString("go build: " + err.Error() + "\n")
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// boxliteCLI runs the binary with a home of the test's own and no server.
func boxliteCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	env := append(os.Environ(), "BOXLITE_HOME="+t.TempDir(), "BOXLITE_REST_URL=", "BOXLITE_API_KEY=")
	return cmdrun.Cmd{Env: env}.Run(t, cliBinary, args...)
}

// everyCommand is each command as typed, subcommands too.
var everyCommand = [][]string{
	{"run"}, {"create"}, {"start"}, {"stop"}, {"restart"}, {"pause"}, {"resume"}, {"exec"},
	{"ls"}, {"ps"}, {"info"}, {"inspect"}, {"stats"}, {"logs"}, {"rm"}, {"cp"},
	{"snapshot"}, {"snapshot", "create"}, {"snapshot", "ls"}, {"snapshot", "rm"}, {"snapshot", "restore"},
	{"clone"}, {"fork"}, {"export"}, {"import"}, {"pull"},
	{"image"}, {"image", "load"}, {"image", "ls"}, {"image", "pull"}, {"image", "rm"}, {"image", "prune"},
	{"serve"}, {"serve", "key"}, {"serve", "key", "create"}, {"serve", "key", "ls"}, {"serve", "key", "rm"},
	{"auth"}, {"auth", "login"}, {"auth", "logout"}, {"auth", "status"}, {"version"}, {"help"},
}

func TestHelpOfEveryCommand(t *testing.T) {
	for _, c := range everyCommand {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string{}, c...), h)
			out, errOut, code := boxliteCLI(t, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: boxlite ") {
				t.Errorf("boxlite %s: exit %d, stderr %q, stdout %.80q", strings.Join(args, " "), code, errOut, out)
			}
			// The command's own section, not the whole usage (help's is the whole).
			if c[0] != "help" && strings.Contains(out, "auth logout") != (c[0] == "auth") {
				t.Errorf("boxlite %s: not the command's help: %.200q", strings.Join(args, " "), out)
			}
		}
	}
	// help COMMAND is COMMAND --help; a run's flags are listed.
	out, _, code := boxliteCLI(t, "help", "run")
	want, _, _ := boxliteCLI(t, "run", "--help")
	if code != 0 || out != want || !strings.Contains(out, "--memory MIB") {
		t.Errorf("help run: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{}, {"--help"}, {"-h"}, {"help"}} {
		out, errOut, code := boxliteCLI(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "COMMAND --help | --version") || !strings.Contains(out, "auth logout") {
			t.Errorf("boxlite %q: exit %d, stderr %q, stdout %.80q", args, code, errOut, out)
		}
	}
}

// A --help after IMAGE or BOX is the command's, not boxlite's: run and
// exec stop parsing there (here it fails on the missing image, not with help).
func TestHelpAfterImageIsTheCommands(t *testing.T) {
	out, errOut, code := boxliteCLI(t, "run", "--rm", "sha256:"+strings.Repeat("0", 64), "--", "ls", "--help")
	if code != 125 || strings.Contains(out, "usage") || !strings.Contains(errOut, "not found") {
		t.Fatalf("run IMAGE -- ls --help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out, errOut, code := boxliteCLI(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "boxlite version "+boxlite.Version) || strings.Count(out, "\n") != 1 {
			t.Errorf("boxlite %q: exit %d, stderr %q, stdout %q", args, code, errOut, out)
		}
	}
}

// oneLineError checks a refusal: exit 125, nothing on stdout, one line on
// stderr that holds want.
func oneLineError(t *testing.T, want string, args ...string) {
	t.Helper()
	out, errOut, code := boxliteCLI(t, args...)
	if code != 125 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "boxlite: ") || !strings.Contains(errOut, want) {
		t.Errorf("boxlite %s: exit %d, stdout %q, stderr %q (want one line with %q)", strings.Join(args, " "), code, out, errOut, want)
	}
}

func TestUnknownFlagsAreRefused(t *testing.T) {
	for _, c := range everyCommand {
		if c[0] == "help" {
			continue
		}
		for _, flag := range []string{"--no-such-flag", "-Z"} {
			oneLineError(t, "unknown flag: "+flag, append(append([]string{}, c...), flag)...)
		}
	}
	oneLineError(t, "unknown flag: --no-such-flag", "--no-such-flag", "ls")
	oneLineError(t, `flag --memory: parse error`, "run", "--memory", "lots", "alpine")
	oneLineError(t, "flag needs an argument: --name", "clone", "--name")
	// -it is -i -t; a combination with an unknown letter is unknown.
	oneLineError(t, "unknown flag: -iZ", "exec", "-iZ", "box", "sh")
}

func TestUnknownArgumentsAreRefused(t *testing.T) {
	for _, c := range []struct {
		want string
		args []string
	}{
		{`unexpected argument "foo"`, []string{"ls", "foo"}},
		{`unexpected argument "foo"`, []string{"ls", "-a", "foo"}},
		{`unexpected argument "foo"`, []string{"serve", "foo"}},
		{`unexpected argument "foo"`, []string{"version", "foo"}},
		{`unexpected argument "x"`, []string{"auth", "status", "x"}},
		{`unexpected argument "x"`, []string{"serve", "key", "ls", "x"}},
		{"want no argument", []string{"image", "ls", "foo"}},
		{"want no argument", []string{"image", "prune", "foo"}},
		{"want PATH", []string{"image", "load"}},
		{"want IMAGE", []string{"pull", "a", "b"}},
		{"want one BOX", []string{"info", "a", "b"}},
		{"want one BOX", []string{"logs"}},
		{"no BOX given", []string{"stop"}},
		{"want BOX [--] CMD", []string{"exec", "box"}},
		{"IMAGE is missing", []string{"run", "--rm"}},
		{"want BOX FILE|DIR", []string{"export", "box"}},
		{"want SRC DST", []string{"cp", "a"}},
		{"exactly one of SRC and DST", []string{"cp", "/a", "/b"}},
		{`unknown subcommand "frob"`, []string{"image", "frob"}},
		{`unknown subcommand "frob"`, []string{"snapshot", "frob", "box"}},
		{`unknown subcommand "frob"`, []string{"auth", "frob"}},
		{`unknown command "frob"`, []string{"frob"}},
		{`no command "frob"`, []string{"help", "frob"}},
	} {
		oneLineError(t, c.want, c.args...)
	}
}

// ls is docker ps: a table, -q only ids, -a all boxes; with no box, -q
// prints nothing and the table only its header. (Which boxes each shows
// is tested with real boxes in tests/integration, TestCLILifecycle.)
func TestLsFlags(t *testing.T) {
	for _, args := range [][]string{{"ls", "-q"}, {"ls", "-a", "-q"}, {"ps", "-aq"}, {"ls", "--all", "--quiet"}} {
		if out, errOut, code := boxliteCLI(t, args...); code != 0 || out != "" || errOut != "" {
			t.Errorf("%q: exit %d, %q, %q", args, code, out, errOut)
		}
	}
	if out, _, code := boxliteCLI(t, "ls", "-a"); code != 0 || !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 1 {
		t.Errorf("ls -a: exit %d, %q", code, out)
	}
}

// parseArgs takes flags among arguments up to a "--" when asked (BOX
// --name N), and only before the first argument otherwise (IMAGE CMD...).
func TestParseArgs(t *testing.T) {
	fs := newFlags("t")
	name := fs.String("name", "", "")
	force := fs.Bool("f", false, "")
	pos, err := parseArgs(fs, []string{"box", "--name", "n", "-f", "--", "--name", "x"}, true)
	if err != nil || *name != "n" || !*force || strings.Join(pos, " ") != "box --name x" {
		t.Fatalf("anywhere: %q %q %v %v", pos, *name, *force, err)
	}
	fs = newFlags("t")
	name = fs.String("name", "", "")
	pos, err = parseArgs(fs, []string{"--name", "n", "img", "--name", "y"}, false)
	if err != nil || *name != "n" || strings.Join(pos, " ") != "img --name y" {
		t.Fatalf("up to the first argument: %q %q %v", pos, *name, err)
	}
	var h *helpRequest
	if _, err := parseArgs(newFlags("t"), []string{"box", "--help"}, true); !errors.As(err, &h) || h.cmd != "t" {
		t.Fatalf("--help after an argument: %v", err)
	}
}
