// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite/abi/convert"
	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/image"
	"github.com/boxlite/boxlite/safetext"
)

const usage = `usage: boxlite COMMAND [ARGS]

  run [--rm] [-d] [--name N] [--memory MIB] [--cpus N] [--disk-size GB] [-e K=V]... [-w DIR]
      [-u USER] [-v HOST:GUEST[:ro|:rw][,size=N]]... [--timeout SECONDS] [-i] [-t]
      [--network enabled|disabled]
      [--allow-net ENTRY[,ENTRY]]... [-p [[IP:]HOST:]GUEST[/udp]]... [--entrypoint EXEC]
      IMAGE [-- CMD [ARGS...]]
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
  exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] [--timeout S] BOX [--] CMD [ARGS...]
                    run CMD in a box (a configured or stopped one is started
                    first) and exit with its exit code (128+N for signal N)
  ls, ps            list boxes: configured, running or stopped
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

run and create pull IMAGE when it is not in the store; one in the store is used as it is.
Exit codes of run and exec: the command's own; 124 when --timeout killed it; 125 when
boxlite failed; 127 when the command was not found. BOXLITE_HOME sets the home (~/.boxlite).
Registries: credentials from the docker config (docker login); BOXLITE_REGISTRY_MIRRORS
(docker.io=http://127.0.0.1:5000,...), BOXLITE_INSECURE_REGISTRIES (host:port,...).
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	code := 0
	switch args[0] {
	case "run":
		code, err = cmdRun(args[1:])
	case "ls", "ps":
		err = cmdLs(args[1:])
	case "info", "inspect":
		err = cmdInfo(args[1:])
	case "stats":
		err = cmdStats(args[1:])
	case "create", "start", "stop", "restart", "exec", "logs":
		code, err = lifecycle(args[0], args[1:])
	case "rm":
		err = cmdRm(args[1:])
	case "cp":
		err = cmdCp(args[1:])
	case "snapshot":
		err = cmdSnapshot(args[1:])
	case "clone":
		err = cmdClone(args[1:])
	case "export":
		err = cmdExport(args[1:])
	case "import":
		err = cmdImport(args[1:])
	case "image":
		err = cmdImage(args[1:])
	case "pull":
		err = cmdImage(append([]string{"pull"}, args[1:]...))
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "boxlite: unknown command %q\n%s", args[0], usage)
		return 2
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

type multi []string

// parseVolume reads -v HOST:GUEST[:OPTIONS], as docker does; OPTIONS are
// comma-separated: ro or rw, and size=N (bytes, or with a k, m, g or t
// suffix, powers of 1024) for a size limit.
func parseVolume(s string) (core.Volume, error) {
	bad := func() (core.Volume, error) {
		return core.Volume{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "-v %q: want HOST:GUEST[:ro|:rw][,size=N[k|m|g|t]]", s)
	}
	f := strings.Split(s, ":")
	if len(f) < 2 || len(f) > 3 {
		return bad()
	}
	v := core.Volume{HostPath: f[0], GuestPath: f[1]}
	if len(f) == 3 {
		for _, o := range strings.Split(f[2], ",") {
			switch {
			case o == "ro" || o == "rw":
				v.ReadOnly = o == "ro"
			case strings.HasPrefix(o, "size="):
				n, ok := parseBytes(strings.TrimPrefix(o, "size="))
				if !ok {
					return bad()
				}
				v.SizeLimitBytes = n
			default:
				return bad()
			}
		}
	}
	return v, nil
}

// parseBytes reads N with an optional k, m, g or t suffix (powers of 1024,
// any case, an optional trailing "b" or "ib").
func parseBytes(s string) (int64, bool) {
	s = strings.ToLower(s)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "b"), "i")
	mult := int64(1)
	if i := strings.IndexAny(s, "kmgt"); i >= 0 && i == len(s)-1 {
		mult = 1 << (10 * (1 + strings.IndexByte("kmgt", s[i])))
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// boxFlags are the box options create and run share.
type boxFlags struct {
	name                 *string
	memory, cpus, disk   *int
	network, entrypoint  *string
	allowNet, ports, vol multi
}

func addBoxFlags(fs *flag.FlagSet) *boxFlags {
	f := &boxFlags{
		name:       fs.String("name", "", "box name"),
		memory:     fs.Int("memory", 512, "guest memory in MiB"),
		cpus:       fs.Int("cpus", 1, "vCPUs"),
		disk:       fs.Int("disk-size", 4, "writable disk size in GB (sparse)"),
		network:    fs.String("network", "", "enabled (default) or disabled (only lo)"),
		entrypoint: fs.String("entrypoint", "", "override the image's entrypoint (and drop its cmd)"),
	}
	fs.Var(&f.allowNet, "allow-net", "where the box may connect: names, *.wildcards, IPs, CIDRs, with :port (repeatable or comma-separated)")
	fs.Var(&f.ports, "p", "publish a port: [[IP:]HOST:]GUEST[/tcp|udp] (repeatable; HOST 0 or none picks one)")
	fs.Var(&f.vol, "v", "volume HOST:GUEST[:ro|:rw][,size=N[k|m|g|t]] (repeatable)")
	return f
}

// options turns the flags into box options.
func (f *boxFlags) options() ([]core.BoxOption, error) {
	opts := []core.BoxOption{core.WithMemoryMiB(*f.memory), core.WithCPUs(*f.cpus), core.WithDiskSizeGB(*f.disk)}
	if *f.name != "" {
		opts = append(opts, core.WithName(*f.name))
	}
	if *f.entrypoint != "" {
		opts = append(opts, core.WithEntrypoint(*f.entrypoint))
	}
	netOpts, err := networkOptions(*f.network, f.allowNet, f.ports)
	if err != nil {
		return nil, err
	}
	opts = append(opts, netOpts...)
	for _, v := range f.vol {
		vol, err := parseVolume(v)
		if err != nil {
			return nil, err
		}
		opts = append(opts, core.WithVolumeSpec(vol))
	}
	return opts, nil
}

// execFlags are the process options exec and run share.
type execFlags struct {
	workdir, user *string
	timeout       *float64
	stdin, tty    *bool
	env           multi
}

func addExecFlags(fs *flag.FlagSet) *execFlags {
	f := &execFlags{
		workdir: fs.String("w", "", "working directory in the box"),
		user:    fs.String("u", "", "user (name, uid or uid:gid)"),
		timeout: fs.Float64("timeout", 0, "kill the command after SECONDS (TERM, then KILL 2s later)"),
		stdin:   fs.Bool("i", false, "forward standard input"),
		tty:     fs.Bool("t", false, "run the command on a terminal (with -i on a terminal: raw mode, size followed)"),
	}
	fs.Var(&f.env, "e", "environment KEY=VALUE (repeatable)")
	return f
}

// command is the process the flags describe (argv empty: the box's
// entrypoint and cmd).
func (f *execFlags) command(argv []string) (core.Command, error) {
	if *f.timeout < 0 {
		return core.Command{}, errdefs.Errorf(errdefs.ErrInvalidArgument, "--timeout %v is negative", *f.timeout)
	}
	return core.Command{Argv: argv, Env: envMap(f.env), Cwd: *f.workdir, User: *f.user,
		Timeout: time.Duration(*f.timeout * float64(time.Second)), Stdin: *f.stdin, Tty: *f.tty}, nil
}

// envMap reads -e KEY=VALUE flags; -e KEY passes the host's value, as docker does.
func envMap(kvs []string) map[string]string {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			v = os.Getenv(k)
		}
		env[k] = v
	}
	return env
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
	opts, err := bf.options()
	if err != nil {
		return 0, err
	}
	if len(argv) > 0 {
		opts = append(opts, core.WithCmd(argv...)) // as docker run: the command replaces the image's cmd
	}
	if *detach {
		opts = append(opts, core.WithDetach())
	}
	if *rm {
		// The box goes when it stops, even when this process is killed
		// (SIGKILL): its shim removes a box whose creator died.
		opts = append(opts, core.WithAutoRemove())
	}
	rt, err := core.NewRuntime()
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	if _, err := ensureImage(rt, imageRef); err != nil {
		return 0, err
	}
	in := catchInterrupts()
	defer in.stop()
	ctx := in.ctx
	box, err := rt.Create(ctx, imageRef, opts...)
	if err != nil {
		return in.interrupted("run", err)
	}
	if _, err := box.DefaultCommand(); err != nil && !*detach {
		cctx, cancel := cleanupContext()
		defer cancel()
		box.Remove(cctx, true) // nothing to run: leave nothing behind
		return 0, fmt.Errorf("run: %w", err)
	}
	if *detach {
		return in.interrupted("run", runDetached(ctx, box, cmd, len(bf.ports) > 0))
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
	return streamExec(in, box, cmd), nil
}

// splitShortFlags turns combined one-letter boolean flags such as -it into
// -i -t (the flag package takes -it for one flag named "it"), up to IMAGE.
func splitShortFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil {
			out = append(out, a)
			if !hasValue && !isBoolFlag(f) && i+1 < len(args) {
				i++
				out = append(out, args[i]) // the flag's value
			}
			continue
		}
		split := !strings.HasPrefix(a, "--") && !hasValue
		for _, c := range name {
			if !isBoolFlag(fs.Lookup(string(c))) {
				split = false
				break
			}
		}
		if !split {
			out = append(out, a) // let Parse report it
			continue
		}
		for _, c := range name {
			out = append(out, "-"+string(c))
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
	rt, err := core.NewRuntime()
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
	return eachBox(args, func(rt *core.Runtime, b *core.Box) error {
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
	return eachBox(fs.Args(), func(rt *core.Runtime, b *core.Box) error { return b.Remove(context.Background(), *force) })
}

// eachBox applies f to each named box, reporting every failure.
func eachBox(names []string, f func(*core.Runtime, *core.Box) error) error {
	if len(names) == 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "no box given")
	}
	rt, err := core.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	var errs []error
	for _, n := range names {
		b, err := rt.Get(context.Background(), n)
		if err == nil {
			err = f(rt, b)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ensureImage returns the image ref from the store, pulling it first (with
// progress on stderr, as stdout is the command's) when the store lacks it.
func ensureImage(rt *core.Runtime, ref string) (image.Image, error) {
	img, err := rt.Images().Get(ref)
	if !errors.Is(err, errdefs.ErrNotFound) || strings.HasPrefix(ref, "sha256:") {
		return img, err
	}
	fmt.Fprintf(os.Stderr, "Pulling %s (not in the store)\n", ref)
	res, err := pull(rt, ref, os.Stderr)
	return res.Image, err
}

// pull pulls ref, showing each layer's bytes on w.
func pull(rt *core.Runtime, ref string, w *os.File) (image.PullResult, error) {
	p := newProgressPrinter(w)
	res, err := rt.Pull(context.Background(), ref, image.WithProgress(p.update))
	p.finish()
	for _, e := range res.Failed {
		printErr(e)
	}
	if err != nil {
		return res, err
	}
	fmt.Fprintf(w, "Pulled %s (%s) from %s, %.1f MB downloaded\n", res.Name, res.Digest, res.Source, float64(res.Downloaded)/1e6)
	return res, nil
}

// progressPrinter shows a pull's layers: on a terminal one line each,
// redrawn in place at most ten times a second; otherwise a plain line when a
// layer starts downloading and one when it is done.
type progressPrinter struct {
	w      io.Writer
	tty    bool
	order  []string
	layers map[string]image.Progress
	drawn  int // lines drawn last time, to move back over
	last   time.Time
	dirty  bool // updated since drawn
}

func newProgressPrinter(f *os.File) *progressPrinter {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return &progressPrinter{w: f, tty: err == nil, layers: map[string]image.Progress{}}
}

func (p *progressPrinter) update(ev image.Progress) {
	prev, seen := p.layers[ev.Layer]
	if !seen {
		p.order = append(p.order, ev.Layer)
	}
	p.layers[ev.Layer] = ev
	if p.tty {
		p.dirty = true
		if time.Since(p.last) >= 100*time.Millisecond || ev.Done == ev.Total {
			p.draw()
		}
		return
	}
	switch {
	case ev.Cached:
		if !seen || prev.Source != ev.Source {
			fmt.Fprintf(p.w, "%s\n", progressLine(ev))
		}
	case !seen || prev.Source != ev.Source:
		fmt.Fprintf(p.w, "%.19s: downloading %.1f MB from %s\n", ev.Layer, float64(ev.Total)/1e6, ev.Source)
	case ev.Done == ev.Total && prev.Done != ev.Total:
		fmt.Fprintf(p.w, "%s\n", progressLine(ev))
	}
}

func (p *progressPrinter) draw() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\x1b[%dA", p.drawn) // cursor up
	}
	for _, l := range p.order {
		fmt.Fprintf(p.w, "\x1b[2K%s\n", progressLine(p.layers[l]))
	}
	p.drawn, p.last, p.dirty = len(p.order), time.Now(), false
}

func (p *progressPrinter) finish() {
	if p.dirty {
		p.draw()
	}
}

func progressLine(ev image.Progress) string {
	switch {
	case ev.Cached:
		return fmt.Sprintf("%.19s: already in the store (%.1f MB)", ev.Layer, float64(ev.Total)/1e6)
	case ev.Done == ev.Total:
		return fmt.Sprintf("%.19s: done %.1f MB", ev.Layer, float64(ev.Total)/1e6)
	}
	return fmt.Sprintf("%.19s: %.1f / %.1f MB", ev.Layer, float64(ev.Done)/1e6, float64(ev.Total)/1e6)
}

func cmdImage(args []string) error {
	if len(args) == 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image load PATH | pull IMAGE | ls | rm IMAGE... | prune [-a]")
	}
	rt, err := core.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	store := rt.Images()
	switch args[0] {
	case "load":
		if len(args) != 2 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image load PATH")
		}
		imgs, err := store.Load(context.Background(), args[1])
		if err != nil {
			return err
		}
		for _, img := range imgs {
			fmt.Printf("Loaded %s (%s)\n", safetext.Line(img.Name), img.Digest)
		}
		return nil
	case "ls":
		imgs, err := store.List()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tDIGEST\tLAYERS\tSIZE")
		for _, i := range imgs {
			fmt.Fprintf(tw, "%s\t%.19s\t%d\t%.1f MB\n", safetext.Line(i.Name), i.Digest, len(i.Layers), float64(i.Size)/1e6)
		}
		return tw.Flush()
	case "pull":
		if len(args) != 2 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite pull IMAGE")
		}
		_, err := pull(rt, args[1], os.Stdout)
		return err
	case "rm":
		if len(args) < 2 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image rm IMAGE...")
		}
		var errs []error
		for _, ref := range args[1:] {
			if err := rt.RemoveImage(ref); err != nil {
				errs = append(errs, err)
			} else {
				fmt.Printf("Removed %s\n", ref)
			}
		}
		return errors.Join(errs...)
	case "prune":
		fs := flag.NewFlagSet("image prune", flag.ContinueOnError)
		all := fs.Bool("a", false, "remove every image that no box uses, named or not")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image prune [-a]")
		}
		res, err := rt.PruneImages(context.Background(), *all)
		if err != nil {
			return err
		}
		for _, n := range res.Images {
			fmt.Printf("Removed %s\n", n)
		}
		fmt.Printf("Freed %.1f MB: %d blobs, %d ext4 layers\n", float64(res.Bytes)/1e6, res.Blobs, res.Layers)
		return nil
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "image: unknown subcommand %q", args[0])
}
