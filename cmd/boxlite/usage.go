package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// Every command parses its arguments with parseArgs: `-h`/`--help` is a
// helpRequest (its help on stdout, exit 0), an unknown flag or a bad value
// one line of error (exit 125, as docker's).

// helpRequest is the error parseArgs returns for -h, -help or --help: run
// prints the help of the command (with fs's flags) on stdout and exits 0.
type helpRequest struct {
	cmd string
	fs  *flag.FlagSet
}

func (h *helpRequest) Error() string { return "help requested for " + h.cmd }

// newFlags is the flag set of command cmd ("run", "image prune", ...).
// Its output is discarded: parseArgs reports errors, help prints the flags.
func newFlags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses fs's flags off args and returns the other arguments.
// Combined one-letter flags (-it, -aq) are split. With anywhere, flags may
// follow arguments too (BOX --name N), until a "--"; without it, parsing
// stops at the first argument (IMAGE or BOX: what follows is the command's).
func parseArgs(fs *flag.FlagSet, args []string, anywhere bool) ([]string, error) {
	var pos []string
	for {
		split := splitShortFlags(fs, args)
		if err := fs.Parse(split); err != nil {
			return nil, flagError(fs, split, err)
		}
		rest := fs.Args()
		used := len(split) - len(rest)
		if !anywhere || len(rest) == 0 || (used > 0 && split[used-1] == "--") {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is the one-line error of a failed fs.Parse of args, or a
// helpRequest.
func flagError(fs *flag.FlagSet, args []string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return &helpRequest{cmd: fs.Name(), fs: fs}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		typed := dashed(name)
		for _, a := range args {
			if n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); n == name && strings.HasPrefix(a, "-") {
				typed, _, _ = strings.Cut(a, "=")
				break
			}
		}
		msg = "unknown flag: " + typed
	} else {
		// "invalid value ... for flag -memory: ...", "flag needs an argument: -name"
		msg = flagName.ReplaceAllStringFunc(msg, func(m string) string {
			i := strings.LastIndexByte(m, ' ')
			return m[:i+1] + dashed(m[i+2:])
		})
	}
	return usageError(fs.Name(), "%s", msg)
}

var flagName = regexp.MustCompile(`(for flag|argument:) -[A-Za-z][-A-Za-z]*`)

// usageError is an invalid-argument error of command cmd (empty: of
// boxlite), one line that ends with where its help is.
func usageError(cmd, format string, a ...any) error {
	where := "boxlite --help"
	if cmd != "" {
		where = "boxlite " + cmd + " --help"
		format = cmd + ": " + format
	}
	return errdefs.New(errdefs.KindInvalidArgument, fmt.Sprintf(format, a...)+" (see '"+where+"')")
}

// subcommand is the subcommand of group (image, snapshot, ...) args
// begin with, one of subs: else a helpRequest for the group, or an error.
func subcommand(group string, args []string, subs ...string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usageError(group, "want %s", strings.Join(subs, ", "))
	case isHelpFlag(args[0]):
		return "", &helpRequest{cmd: group}
	case strings.HasPrefix(args[0], "-"):
		return "", usageError(group, "unknown flag: %s", args[0])
	case !slices.Contains(subs, args[0]):
		return "", usageError(group, "unknown subcommand %q: want %s", args[0], strings.Join(subs, ", "))
	}
	return args[0], nil
}

// noArgs refuses arguments a command does not take.
func noArgs(cmd string, pos []string) error {
	if len(pos) > 0 {
		return usageError(cmd, "unexpected argument %q", pos[0])
	}
	return nil
}

// dashed is a flag's name as written on a command line: -x, --long.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// section is one command's part of the usage: its names (the first word
// of a command; `image ls` is the image section's) and its lines.
type section struct {
	names []string
	text  string
}

// help prints command cmd's help on w: its lines of the usage, then its
// flags (fs's, if any). An unknown cmd gives the whole usage.
func help(w io.Writer, cmd string, fs *flag.FlagSet) {
	word, _, _ := strings.Cut(cmd, " ")
	s := findSection(word)
	if s == nil {
		io.WriteString(w, usage())
		return
	}
	fmt.Fprintf(w, "usage: boxlite %s", strings.TrimLeft(s.text, " \n"))
	if fs == nil {
		return
	}
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "\noptions of %s:\n", cmd)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range flags {
		arg, what := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + strings.ToUpper(arg)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s%s\t%s%s\n", dashed(f.Name), arg, what, def)
	}
	tw.Flush()
}

func findSection(name string) *section {
	for i := range sections {
		for _, n := range sections[i].names {
			if n == name {
				return &sections[i]
			}
		}
	}
	return nil
}

// usage is boxlite's whole help.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: boxlite [--url URL | --profile NAME] COMMAND [ARGS]\n" +
		"       boxlite COMMAND --help | --version\n\n")
	for _, s := range sections {
		if s.names[0] == "auth" {
			b.WriteString(remoteText)
		}
		b.WriteString(s.text)
	}
	return b.String()
}

// version is what --version prints: the version, and the commit when the
// binary was built from a checkout.
func version() string {
	v := "boxlite version " + boxlite.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += ", commit " + rev + dirty
		}
		v += ", " + bi.GoVersion
	}
	return v + "\n"
}

// isHelpFlag reports whether a is -h, -help or --help.
func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
