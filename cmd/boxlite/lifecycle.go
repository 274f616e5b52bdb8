package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/backend"
	"github.com/boxlite/boxlite/internal/safetext"
)

// lifecycle runs create, start, stop, restart, pause, resume, exec and logs.
func lifecycle(op string, args []string) (int, error) {
	ctx := context.Background()
	switch op {
	case "start", "stop", "restart", "pause", "resume":
		names, err := parseArgs(newFlags(op), args, true)
		if err == nil && len(names) == 0 {
			err = usageError(op, "no BOX given")
		}
		if err != nil {
			return 0, err
		}
		args = names
	}
	switch op {
	case "create":
		return 0, cmdCreate(args)
	case "start":
		// A start that is interrupted leaves nothing: its shim and VMM are ended.
		in := catchInterrupts()
		defer in.stop()
		return in.interrupted("start", eachBox(args, func(b backend.Box) error {
			if err := detached(b, "start"); err != nil {
				return err
			}
			return b.Start(in.ctx)
		}))
	case "stop":
		return 0, eachBox(args, func(b backend.Box) error { return b.Stop(ctx) })
	case "restart":
		in := catchInterrupts()
		defer in.stop()
		return in.interrupted("restart", eachBox(args, func(b backend.Box) error {
			if err := detached(b, "restart"); err != nil {
				return err
			}
			if err := b.Stop(ctx); err != nil {
				return err
			}
			return b.Start(in.ctx)
		}))
	case "pause":
		return 0, eachBox(args, func(b backend.Box) error {
			p, err := b.Pause(ctx) // a server's box refuses it (unsupported)
			if err == nil {
				fmt.Fprintf(os.Stderr, "%s: paused (state %.1f MiB, saved in %.0f ms)\n", b.ID(), float64(p.StateBytes)/(1<<20), p.SaveMs)
			}
			return err
		})
	case "resume":
		in := catchInterrupts()
		defer in.stop()
		return in.interrupted("resume", eachBox(args, func(bb backend.Box) error {
			if err := detached(bb, "resume"); err != nil {
				return err
			}
			return bb.Resume(in.ctx) // a server's box refuses it (unsupported)
		}))
	case "exec":
		return cmdExec(args)
	case "logs":
		return 0, cmdLogs(args)
	}
	return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "unknown command %q", op)
}

// detached refuses to boot, for op, a box that would stop when this command
// exits (one a program created without detach).
func detached(b backend.Box, op string) error {
	if b.Info().Config.Detach {
		return nil
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: box %s is not detached: it would stop as soon as boxlite exits (start it from the program that made it, or exec into it)", op, b.ID())
}

// cmdCreate registers a box without booting it and prints its id. The box
// is detached, as docker's are: a later start or exec boots a VM that
// outlives the CLI.
func cmdCreate(args []string) error {
	fs := newFlags("create")
	fs.Bool("d", true, "detached (always: a CLI box outlives the CLI)")
	fs.Bool("detach", true, "same as -d")
	rm := fs.Bool("rm", false, "remove the box when it stops")
	bf := addBoxFlags(fs)
	workdir := fs.String("w", "", "default working `DIR` of the box's processes")
	user := fs.String("u", "", "default `USER` of the box's processes")
	var env multi
	fs.Var(&env, "e", "environment `KEY=VALUE` of every process of the box (repeatable)")
	pos, err := parseArgs(fs, args, false)
	if err != nil {
		return err
	}
	imageRef, argv, err := imageAndCommand("create", pos)
	if err != nil {
		return err
	}
	o, err := bf.options(imageRef)
	if err != nil {
		return err
	}
	// A created box is kept unless --rm, as docker's (the library's default removes it).
	o.Detach, o.WorkingDir, o.User, o.AutoRemove = true, *workdir, *user, rm
	if len(argv) > 0 {
		o.Cmd = argv
	}
	if len(env) > 0 {
		o.Env = envMap(env)
	}
	rt, local, err := openRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	if local == nil && *rm {
		// The server keeps a box until it is removed; none removes itself
		// when another command stops it.
		return notOverURL("create --rm")
	}
	if local != nil {
		if _, err := ensureImage(local, imageRef); err != nil {
			return err
		}
	}
	b, err := rt.Create(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Println(b.ID())
	return nil
}

// cmdExec runs a command in a box (started first when configured or
// stopped) and exits with its exit code, 128+N when signal N ended it.
func cmdExec(args []string) (int, error) {
	fs := newFlags("exec")
	ef := addExecFlags(fs)
	pos, err := parseArgs(fs, args, false)
	if err != nil {
		return 0, err
	}
	name, argv, err := imageAndCommand("exec", pos)
	if err != nil || len(argv) == 0 {
		return 0, usageError("exec", "want BOX [--] CMD [ARGS...]")
	}
	cmd, err := ef.command(argv)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	rt, _, err := openRuntime()
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	in := catchInterrupts()
	defer in.stop()
	b, err := rt.Get(in.ctx, name)
	if err != nil {
		return 0, err
	}
	return streamExec(in, b, cmd), nil
}

// streamExec runs cmd in b with this process's stdio and returns its exit
// code (see usage for those boxlite itself uses). Signals caught by in are
// passed on to the command; one that does not end within execGrace (say,
// its background child holds its output open), or a second signal, makes
// it abandon the command, killed in the box, with 128+N.
func streamExec(in *interrupts, b backend.Box, cmd boxlite.Command) int {
	ctx := in.ctx
	// The host terminal: the box's gets its size, and with -i its input in
	// raw mode, so that keys (^C, ^D, arrows) reach the box's terminal as typed.
	var host *hostTerminal
	if cmd.Tty {
		host = openHostTerminal(cmd.Stdin)
		cmd.Rows, cmd.Cols = host.size()
	}
	e, err := b.Exec(ctx, cmd)
	if err != nil {
		if code, _ := in.interrupted("exec", err); code != 0 {
			return code
		}
		printErr(err)
		return exitFor(err)
	}
	if host != nil {
		if err := host.makeRaw(); err != nil {
			printErr(err)
		}
		defer host.restore()
		go host.followSize(e, cmd.Rows, cmd.Cols)
	}
	defer in.forwardTo(func(sig syscall.Signal) { e.Signal(sig) })()
	if cmd.Stdin {
		go func() { io.Copy(e.Stdin(), os.Stdin); e.Stdin().Close() }()
	}
	copied := make(chan struct{}, 2)
	go func() { io.Copy(os.Stdout, e.Stdout()); copied <- struct{}{} }()
	go func() { io.Copy(os.Stderr, e.Stderr()); copied <- struct{}{} }()
	st, err := e.Wait(ctx)
	abandoned := ctx.Err() != nil && err != nil
	if abandoned {
		e.Close() // kills it (its process group) in the box; its output ends
	}
	<-copied
	<-copied
	host.restore() // before anything else is printed
	if abandoned {
		code, _ := in.interrupted("the command in the box", err)
		return code
	}
	if err != nil {
		printErr(err)
		return exitFor(err)
	}
	return st.Code
}

// runDetached is run -d: boot the (detached) box, start its command, if it
// has one, in the background of the box (its output discarded: it must
// outlive this process, and an exec ends with its client), print the id.
// The command is the box's default (entrypoint and cmd) on this machine;
// a server's box runs no image default: there it is argv, if any.
func runDetached(ctx context.Context, b backend.Box, cmd boxlite.Command, argv []string, published bool) error {
	var noCommand error
	if l := backend.LocalBox(b); l != nil {
		argv, noCommand = l.DefaultCommand()
	} else if len(argv) == 0 {
		noCommand = errdefs.ErrNotFound
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	if published {
		fmt.Fprintf(os.Stderr, "boxlite: published %s\n", portsString(boxPorts(b.Info())))
	}
	if noCommand == nil {
		cmd.Argv = append([]string{"/bin/sh", "-c", `"$@" </dev/null >/dev/null 2>&1 &`, "boxlite-run"}, argv...)
		res, err := b.Run(ctx, cmd)
		if err == nil && res.Code != 0 {
			err = fmt.Errorf("run -d: starting %q in the box failed (exit %d): %s", argv, res.Code, safetext.Text(string(res.Stderr)))
		}
		if err != nil {
			return err
		}
	}
	fmt.Println(b.ID())
	return nil
}

// cmdLogs prints a box's shim log and guest console (the last MiB of each;
// the box directory keeps at most two console files), then with -f follows
// them until the box stops or ^C.
func cmdLogs(args []string) error {
	fs := newFlags("logs")
	follow := fs.Bool("f", false, "follow until the box stops or ^C")
	fs.BoolVar(follow, "follow", false, "same as -f")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("logs", "want one BOX")
	}
	return eachBox(pos, func(bb backend.Box) error {
		b := backend.LocalBox(bb) // logs is refused over --url
		for _, l := range b.Logs(1 << 20) {
			fmt.Fprintf(os.Stderr, "==> %s <==\n", l.Name)
			fmt.Println(l.Text)
		}
		if !*follow {
			return nil
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := b.FollowLogs(ctx, func(l boxlite.BoxLog) { os.Stdout.WriteString(l.Text) }); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
}
