// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
	"github.com/boxlite/boxlite/internal/safetext"
)

const usage = `usage: boxlite [--url URL | --profile NAME] COMMAND [ARGS]

  run [--rm] [-d] [--name N] [--memory MIB] [--cpus N] [--disk-size GB] [-e K=V]... [-w DIR]
      [-u USER] [-v HOST:GUEST[:ro|:rw][,size=N]]... [--timeout SECONDS] [-i] [-t]
      [--network enabled|disabled]
      [--allow-net ENTRY[,ENTRY]]... [-p [[IP:]HOST:]GUEST[/udp]]... [--entrypoint EXEC]
      [--secret NAME=VALUE@HOST[,HOST]]... IMAGE [-- CMD [ARGS...]]
                    boot a box from IMAGE, run CMD (default: the image's entrypoint
                    and cmd), stream its output and exit with its exit code;
                    -d boots a detached box instead, starts CMD (if any) in its
                    background with its output discarded, and prints the box id;
                    -i forwards stdin, -t gives CMD a terminal (-it: an interactive
                    shell, with this terminal in raw mode and its size followed);
                    --network disabled leaves the box only lo; --allow-net limits
                    where it may connect (names, *.wildcards, IPs, CIDRs, :port);
                    -p publishes GUEST on the host (IP 127.0.0.1; HOST 0 or none
                    picks a free port, printed on stderr); the box reaches the
                    host's 127.0.0.1 as host.boxlite.internal
                    -v mounts a host folder or file in the box (:ro read-only;
                    size=N, e.g. :rw,size=1g, stops the box when it stores more)
                    --secret: the box sees $BOXLITE_SECRET_<NAME>, a placeholder
                    the host replaces with VALUE in HTTPS requests to HOST
                    (name, *.wildcard, :port; default 443); NAME@HOST takes
                    VALUE from $NAME (docs/secrets.md)
  create [--rm] [-e K=V]... [-w DIR] [-u USER] [box options as run] IMAGE [CMD [ARGS...]]
                    register a box without booting it and print its id; CMD
                    replaces the image's cmd; the box is detached (as docker's):
                    started, it outlives this command
  start BOX...      boot configured or stopped detached boxes (as create makes; a
                    running one is left as is)
  stats [--json] [--no-stream] [BOX...]
                    print the metrics of running boxes (default: all) once: CPU %
                    and memory of the VMM, execs and those that failed to start,
                    the network's bytes; --json prints every metric
  stop BOX...       stop boxes (their disks are kept)
  restart BOX...    stop, then start detached boxes
  pause BOX...      save running boxes (memory and devices) into their directories
                    and end their processes: a paused box holds no process and no
                    memory; exec, cp, resume or start bring it back as it was
                    (boxes with volumes cannot pause); stop drops the saved state
  resume BOX...     restore paused detached boxes (a state saved by another QEMU,
                    kernel or machine shape is refused: the box is then stopped)
  exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] [--timeout S] BOX [--] CMD [ARGS...]
                    run CMD in a box (a configured or stopped one is started
                    first) and exit with its exit code (128+N for signal N)
  ls, ps            list boxes: configured, running, paused or stopped
  info, inspect BOX describe a box as JSON (state, acceleration and why, boot timings)
  logs [-f] BOX     print the box's shim log and guest console; -f follows them
                    until the box stops or ^C
  rm [-f] BOX...    remove boxes; -f stops running ones first
  cp [-L] [--no-overwrite] SRC DST
                    copy files between the host and a box, as docker cp
                    does: BOX:PATH on one side (-L follows a symlink named as SRC)
  snapshot create BOX [NAME] | ls BOX | rm BOX NAME | restore BOX NAME
                    snapshots of a stopped box's disk (kept with the box);
                    restore replaces the disk with the snapshot's
  clone [--name N] [--snapshot S] BOX
                    a stopped copy of a stopped box (or of one of its snapshots)
  fork [-n N] [--name N]... BOX
                    running copies of a running box at this instant (its memory,
                    processes and disk); each its own machine (hostname,
                    entropy, network, host ports); the box runs on
  export BOX FILE|DIR
                    write a stopped box (config, disk, image) to one archive
  import [--name N] [--rm] [box options as run: --memory, --cpus, --disk-size, --network,
      --allow-net, -p, -v, --entrypoint] FILE
                    make a stopped, detached box from an archive; it needs no
                    registry. The box is new: of the archive's config it keeps
                    the image, env, entrypoint and cmd, user and working
                    directory; memory, CPUs, disk size (the archive's disk must
                    fit), network, published ports, kernel arguments and boot
                    timeout are these options' or the defaults
  pull IMAGE        fetch IMAGE from its registry (or a mirror) into the store
  image load PATH   import an OCI layout directory or a docker-archive tar
  image ls          list images
  image rm IMAGE... remove image names (a box keeps the image it uses)
  image prune [-a]  remove unnamed images (-a: all images) that no box uses, and
                    the blobs and layers nothing needs

  serve [--listen HOST:PORT] [--tls-cert F --tls-key F] [--insecure-no-tls] [--keys FILE]
      [--access-log FILE] [--max-boxes-per-key N] [--max-memory-mib-per-key N]
      [--max-execs-per-key N] [--max-transfer-bytes N]
                    serve BoxLite's REST API (default 127.0.0.1:8100, under /v1;
                    schema at /v1/openapi.json) over this home until SIGINT or
                    SIGTERM; every request but /v1/config, /v1/openapi.json and
                    /healthz needs Authorization: Bearer KEY; a listen beyond
                    loopback needs TLS (or --insecure-no-tls)
  serve key create [--keys FILE] [--name N] | ls [--keys FILE] | rm [--keys FILE] NAME
                    make a key (printed once; only its hash is kept), list, revoke

run and create pull IMAGE when it is not in the store; one in the store is used as it is.
Exit codes of run and exec: the command's own; 124 when --timeout killed it; 125 when
boxlite failed; 127 when the command was not found. BOXLITE_HOME sets the home (~/.boxlite).
Registries: credentials from the docker config (docker login); BOXLITE_REGISTRY_MIRRORS
(docker.io=http://127.0.0.1:5000,...), BOXLITE_INSECURE_REGISTRIES (host:port,...).

A server (boxlite serve): --url URL (or BOXLITE_REST_URL) or --profile NAME, before the
command, runs ls/ps, info, create, start, stop, restart, rm, exec, run, cp, pull and image ls
there (any other command fails); the key is BOXLITE_API_KEY, else the profile's (--profile's,
or "default"'s when saved for that url).
  auth login [--profile N] [--url URL] [--api-key-stdin]
                    check a key (prompted, or one line on stdin) with the server and
                    save it in $BOXLITE_HOME/credentials.toml (mode 0600)
  auth logout [--profile N] | status [--profile N]
                    remove a profile; show its url and key name (never the key)
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	args, err := parseGlobal(args)
	if err == nil && len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	if err == nil && remote() && !remoteCommands[args[0]] {
		err = notOverURL(args[0])
	}
	code := 0
	if err == nil {
		code, err = dispatch(args)
	}
	if err != nil {
		printErr(err)
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			return 2
		}
		return 125
	}
	return code
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
		err = cmdImage(append([]string{"pull"}, args[1:]...))
	case "serve":
		err = cmdServe(args[1:])
	case "auth":
		err = cmdAuth(args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "boxlite: unknown command %q\n%s", args[0], usage)
		return 2, nil
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
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	rm := fs.Bool("rm", false, "remove the box when the command ends")
	detach := fs.Bool("d", false, "boot a detached box, start the command in it in the background, print the box id")
	fs.BoolVar(detach, "detach", false, "same as -d")
	bf := addBoxFlags(fs)
	ef := addExecFlags(fs)
	if err := fs.Parse(splitShortFlags(fs, args)); err != nil {
		return 2, nil
	}
	imageRef, argv, err := imageAndCommand("run", fs.Args())
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

func cmdLs(args []string) error {
	rt, _, err := openRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	infos, err := rt.List(context.Background())
	if err != nil {
		return err
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
	if len(args) != 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite info BOX")
	}
	return eachBox(args, func(b backend.Box) error {
		printJSON(convert.BoxInfo(b.Info()))
		return nil
	})
}

func cmdRm(args []string) error {
	fs := flag.NewFlagSet("rm", flag.ContinueOnError)
	force := fs.Bool("f", false, "stop running boxes first")
	if err := fs.Parse(args); err != nil {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "rm: %v", err)
	}
	return eachBox(fs.Args(), func(b backend.Box) error { return b.Remove(context.Background(), *force) })
}

// eachBox applies f to each named box (of the runtime openRuntime opens),
// reporting every failure.
func eachBox(names []string, f func(backend.Box) error) error {
	if len(names) == 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "no box given")
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
