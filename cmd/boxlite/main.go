// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite/core"
	"github.com/boxlite/boxlite/errdefs"
)

const usage = `usage: boxlite COMMAND [ARGS]

  run [--rm] [--name N] [--memory MIB] [--cpus N] [--disk-size GB] [-e K=V]... [-w DIR]
      [-u USER] [--timeout SECONDS] [-i] IMAGE [-- CMD [ARGS...]]
                    boot a box from IMAGE, run CMD (default: the image's entrypoint
                    and cmd), stream its output and exit with its exit code
  ls                list boxes
  info BOX          describe a box (state, acceleration and why, boot timings)
  stop BOX...       stop boxes (their disks are kept)
  rm [-f] BOX...    remove boxes; -f stops running ones first
  image load PATH   import an OCI layout directory or a docker-archive tar
  image ls          list images
  image rm IMAGE    remove an image name

Exit codes of run: the command's own; 124 when --timeout killed it; 125 when boxlite
failed; 127 when the command was not found. BOXLITE_HOME sets the home (~/.boxlite).
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
	case "stop":
		err = eachBox(args[1:], func(rt *core.Runtime, b *core.Box) error { return b.Stop(context.Background()) })
	case "rm":
		err = cmdRm(args[1:])
	case "image":
		err = cmdImage(args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "boxlite: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "boxlite: %v\n", err)
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			return 2
		}
		return 125
	}
	return code
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func cmdRun(args []string) (int, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	rm := fs.Bool("rm", false, "remove the box when the command ends")
	name := fs.String("name", "", "box name")
	memory := fs.Int("memory", 512, "guest memory in MiB")
	cpus := fs.Int("cpus", 1, "vCPUs")
	disk := fs.Int("disk-size", 4, "writable disk size in GB (sparse)")
	workdir := fs.String("w", "", "working directory in the box")
	user := fs.String("u", "", "user (name, uid or uid:gid)")
	timeout := fs.Float64("timeout", 0, "kill the command after SECONDS (TERM, then KILL 2s later)")
	stdin := fs.Bool("i", false, "forward standard input")
	var env multi
	fs.Var(&env, "e", "environment KEY=VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2, nil
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "run: IMAGE is missing")
	}
	imageRef, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if *timeout < 0 {
		return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "run: --timeout %v is negative", *timeout)
	}
	opts := []core.BoxOption{core.WithMemoryMiB(*memory), core.WithCPUs(*cpus), core.WithDiskSizeGB(*disk)}
	if *name != "" {
		opts = append(opts, core.WithName(*name))
	}
	cmdEnv := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			v = os.Getenv(k) // -e KEY passes the host's value, as docker does
		}
		cmdEnv[k] = v
	}

	rt, err := core.NewRuntime()
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	if len(argv) == 0 {
		img, err := rt.Images().Get(imageRef)
		if err != nil {
			return 0, err
		}
		argv = append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
		if len(argv) == 0 {
			return 0, errdefs.Errorf(errdefs.ErrInvalidArgument, "run: no command given and image %s has no entrypoint or cmd", imageRef)
		}
	}
	ctx := context.Background()
	box, err := rt.Create(ctx, imageRef, opts...)
	if err != nil {
		return 0, err
	}
	defer func() {
		if *rm {
			if err := box.Remove(ctx, true); err != nil {
				fmt.Fprintf(os.Stderr, "boxlite: %v\n", err)
			}
		} else {
			box.Stop(ctx)
		}
	}()

	e, err := box.Exec(ctx, core.Command{Argv: argv, Env: cmdEnv, Cwd: *workdir, User: *user,
		Timeout: time.Duration(*timeout * float64(time.Second)), Stdin: *stdin})
	if err != nil {
		return exitFor(err), err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			e.Signal(sig.(syscall.Signal))
		}
	}()
	if *stdin {
		go func() { io.Copy(e.Stdin, os.Stdin); e.Stdin.Close() }()
	}
	copied := make(chan struct{}, 2)
	go func() { io.Copy(os.Stdout, e.Stdout); copied <- struct{}{} }()
	go func() { io.Copy(os.Stderr, e.Stderr); copied <- struct{}{} }()
	st, err := e.Wait(ctx)
	<-copied
	<-copied
	if err != nil {
		fmt.Fprintf(os.Stderr, "boxlite: %v\n", err)
		return exitFor(err), nil
	}
	return st.Code, nil
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
	fmt.Fprintln(tw, "ID\tNAME\tIMAGE\tSTATE\tCREATED")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.ID, i.Name, i.Image, i.State, i.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func cmdInfo(args []string) error {
	if len(args) != 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite info BOX")
	}
	return eachBox(args, func(rt *core.Runtime, b *core.Box) error {
		out, _ := json.MarshalIndent(b.Info(), "", "  ")
		fmt.Println(string(out))
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

func cmdImage(args []string) error {
	if len(args) == 0 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image load PATH | ls | rm IMAGE")
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
			fmt.Printf("Loaded %s (%s)\n", img.Name, img.Digest)
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
			fmt.Fprintf(tw, "%s\t%.19s\t%d\t%.1f MB\n", i.Name, i.Digest, len(i.Layers), float64(i.Size)/1e6)
		}
		return tw.Flush()
	case "rm":
		if len(args) != 2 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite image rm IMAGE")
		}
		return store.Remove(args[1])
	}
	return errdefs.Errorf(errdefs.ErrInvalidArgument, "image: unknown subcommand %q", args[0])
}
