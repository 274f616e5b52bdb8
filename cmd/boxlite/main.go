// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
	"github.com/boxlite/boxlite/internal/safetext"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	args, err := parseGlobal(args)
	if err == nil && len(args) == 0 {
		fmt.Print(usage()) // as docker: the help, exit 0
		return 0
	}
	if err == nil && remote() && !remoteCommands[args[0]] && !wantsHelp(args) {
		err = notOverURL(args[0])
	}
	code := 0
	if err == nil {
		code, err = dispatch(args)
	}
	var h *helpRequest
	if errors.As(err, &h) {
		help(os.Stdout, h.cmd, h.fs)
		return 0
	}
	if err != nil {
		printErr(err)
		return 125 // as docker's: boxlite failed (a bad flag or argument too)
	}
	return code
}

// wantsHelp reports whether args is COMMAND [SUB] --help.
func wantsHelp(args []string) bool {
	for _, a := range args[1:min(len(args), 3)] {
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// dispatch runs the command args name.
func dispatch(args []string) (code int, err error) {
	switch args[0] {
	case "run":
		code, err = cmdRun(args[1:])
	case "ls", "ps":
		err = cmdLs(args[1:])
	case "info", "inspect":
		err = cmdInfo(args[1:])
	case "stats":
		err = cmdStats(args[1:])
	case "create", "start", "stop", "restart", "pause", "resume", "exec", "logs":
		code, err = lifecycle(args[0], args[1:])
	case "rm":
		err = cmdRm(args[1:])
	case "cp":
		err = cmdCp(args[1:])
	case "snapshot":
		err = cmdSnapshot(args[1:])
	case "clone":
		err = cmdClone(args[1:])
	case "fork":
		err = cmdFork(args[1:])
	case "export":
		err = cmdExport(args[1:])
	case "import":
		err = cmdImport(args[1:])
	case "image":
		err = cmdImage(args[1:])
	case "pull":
		err = cmdPull(args[1:])
	case "serve":
		err = cmdServe(args[1:])
	case "auth":
		err = cmdAuth(args[1:])
	case "version", "--version", "-v":
		var pos []string
		if pos, err = parseArgs(newFlags("version"), args[1:], true); err == nil {
			err = noArgs("version", pos)
		}
		if err == nil {
			fmt.Print(version())
		}
	case "help", "-h", "-help", "--help":
		switch {
		case len(args) == 1 || wantsHelp(args):
			fmt.Print(usage())
		case len(args) == 2 && findSection(args[1]) != nil:
			return dispatch([]string{args[1], "--help"})
		default:
			err = usageError("help", "no command %q", strings.Join(args[1:], " "))
		}
	default:
		if strings.HasPrefix(args[0], "-") {
			return 0, usageError("", "unknown flag: %s", args[0])
		}
		return 0, usageError("", "unknown command %q", args[0])
	}
	return code, err
}

// imageAndCommand splits IMAGE [--] [CMD...].
func imageAndCommand(op string, rest []string) (string, []string, error) {
	if len(rest) == 0 {
		return "", nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: IMAGE is missing", op)
	}
	argv := rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	return rest[0], argv, nil
}

func cmdRun(args []string) (int, error) {
	fs := newFlags("run")
	rm := fs.Bool("rm", false, "remove the box when the command ends")
	detach := fs.Bool("d", false, "boot a detached box, start the command in it in the background, print the box id")
	fs.BoolVar(detach, "detach", false, "same as -d")
	bf := addBoxFlags(fs)
	ef := addExecFlags(fs)
	pos, err := parseArgs(fs, args, false)
	if err != nil {
		return 0, err
	}
	imageRef, argv, err := imageAndCommand("run", pos)
	if err != nil {
		return 0, err
	}
	cmd, err := ef.command(nil)
	if err != nil {
		return 0, fmt.Errorf("run: %w", err)
	}
	if *detach && (*rm || cmd.Stdin || cmd.Tty) {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "run: -d cannot be combined with --rm, -i or -t")
	}
	o, err := bf.options(imageRef)
	if err != nil {
		return 0, err
	}
	if len(argv) > 0 {
		o.Cmd = argv // as docker run: the command replaces the image's cmd
	}
	o.Detach = *detach
	// Kept unless --rm, as docker's (the library's default removes it).
	// With --rm the box goes when it stops, even when this process is
	// killed (SIGKILL): its shim removes a box whose creator died (a
	// server's box: this command removes it).
	o.AutoRemove = rm
	rt, local, err := openRuntime()
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	if local != nil {
		if _, err := ensureImage(local, imageRef); err != nil {
			return 0, err
		}
	} else if len(argv) == 0 {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "run over --url needs CMD: a server's box runs no image default")
	}
	in := catchInterrupts()
	defer in.stop()
	ctx := in.ctx
	box, err := rt.Create(ctx, o)
	if err != nil {
		return in.interrupted("run", err)
	}
	if l := backend.LocalBox(box); l != nil {
		if _, err := l.DefaultCommand(); err != nil && !*detach {
			cctx, cancel := cleanupContext()
			defer cancel()
			box.Remove(cctx, true) // nothing to run: leave nothing behind
			return 0, fmt.Errorf("run: %w", err)
		}
	}
	if *detach {
		return in.interrupted("run", runDetached(ctx, box, cmd, argv, len(bf.ports) > 0))
	}
	defer func() {
		// Also after an interrupt: its own deadline, not ctx.
		cctx, cancel := cleanupContext()
		defer cancel()
		if *rm {
			if err := box.Remove(cctx, true); err != nil {
				printErr(err)
			}
		} else {
			box.Stop(cctx)
		}
	}()
	if err := box.Start(ctx); err != nil {
		return in.interrupted("run", err)
	}
	if len(bf.ports) > 0 {
		fmt.Fprintf(os.Stderr, "boxlite: published %s\n", portsString(boxPorts(box.Info())))
	}
	if local == nil {
		cmd.Argv = argv
	}
	return streamExec(in, box, cmd), nil
}

func exitFor(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrTimeout):
		return 124
	case errors.Is(err, errdefs.ErrNotFound):
		return 127
	}
	return 125
}

// cmdLs lists boxes as docker ps: the running ones (paused too; starting
// and stopping ones are on their way), -a all, -q only their ids.
func cmdLs(args []string) error {
	fs := newFlags("ls")
	all := fs.Bool("a", false, "all boxes (default: the running and paused ones)")
	fs.BoolVar(all, "all", false, "same as -a")
	quiet := fs.Bool("q", false, "only the box ids")
	fs.BoolVar(quiet, "quiet", false, "same as -q")
	pos, err := parseArgs(fs, args, true)
	if err == nil {
		err = noArgs("ls", pos)
	}
	if err != nil {
		return err
	}
	rt, _, err := openRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	infos, err := rt.List(context.Background())
	if err != nil {
		return err
	}
	if !*all {
		infos = slices.DeleteFunc(infos, func(i boxlite.BoxInfo) bool {
			return i.State == boxlite.StateConfigured || i.State == boxlite.StateStopped || i.State == boxlite.StateRemoved
		})
	}
	if *quiet {
		for _, i := range infos {
			fmt.Println(i.ID)
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tIMAGE\tSTATE\tCREATED\tPORTS")
	for _, i := range infos {
		// Names and images may come from archives and older records: one
		// line each, no control characters.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, safetext.Line(i.Name), safetext.Line(i.Image), i.State,
			i.CreatedAt.Local().Format(time.DateTime), safetext.Line(portsString(boxPorts(i))))
	}
	return tw.Flush()
}

func cmdInfo(args []string) error {
	pos, err := parseArgs(newFlags("info"), args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("info", "want one BOX")
	}
	return eachBox(pos, func(b backend.Box) error {
		printJSON(convert.BoxInfo(b.Info()))
		return nil
	})
}

func cmdRm(args []string) error {
	fs := newFlags("rm")
	force := fs.Bool("f", false, "stop running boxes first")
	fs.BoolVar(force, "force", false, "same as -f")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	return eachBox(pos, func(b backend.Box) error { return b.Remove(context.Background(), *force) })
}

// eachBox applies f to each named box (of the runtime openRuntime opens),
// reporting every failure.
func eachBox(names []string, f func(backend.Box) error) error {
	if len(names) == 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "no BOX given")
	}
	rt, _, err := openRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	var errs []error
	for _, n := range names {
		b, err := rt.Get(context.Background(), n)
		if err == nil {
			err = f(b)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
