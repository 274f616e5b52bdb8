package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

const snapshotUsage = "usage: boxlite snapshot create [--memory] BOX [NAME] | ls BOX | rm BOX NAME | restore BOX NAME"

// parseAnywhere parses fs's flags wherever they are among args (BOX --name N
// as well as --name N BOX) and returns the other arguments, in order.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// cmdSnapshot manages snapshots of a box: its disk, and with create
// --memory its memory too.
func cmdSnapshot(args []string) error {
	memory := false
	if len(args) > 1 && args[0] == "create" && args[1] == "--memory" {
		memory = true
		args = append([]string{"create"}, args[2:]...)
	}
	if len(args) < 2 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, snapshotUsage)
	}
	sub, box, rest := args[0], args[1], args[2:]
	ctx := context.Background()
	need := func(n int) error {
		if len(rest) != n {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, snapshotUsage)
		}
		return nil
	}
	var op func(backend.Box) error
	switch sub {
	case "create":
		if len(rest) > 1 {
			return errdefs.Errorf(errdefs.ErrInvalidArgument, snapshotUsage)
		}
		name := ""
		if len(rest) == 1 {
			name = rest[0]
		}
		op = func(b backend.Box) error {
			si, err := b.CreateSnapshotWith(ctx, name, boxlite.SnapshotOptions{Memory: memory})
			if err == nil {
				fmt.Printf("%s\t%s\n", si.Name, si.ID)
			}
			return err
		}
	case "ls", "list":
		if err := need(0); err != nil {
			return err
		}
		op = func(b backend.Box) error {
			all, err := b.Snapshots(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tCREATED\tSIZE\tDISK\tMEMORY")
			for _, s := range all {
				mem := "-"
				if s.Memory {
					mem = fmt.Sprintf("%.1f MB", float64(s.MemoryBytes)/1e6)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f MB\t%.1f GB\t%s\n", s.Name, s.ID, time.Unix(s.CreatedAt, 0).Local().Format(time.DateTime),
					float64(s.SizeBytes)/1e6, float64(s.ContainerDiskBytes)/(1<<30), mem)
			}
			return tw.Flush()
		}
	case "rm", "remove":
		if err := need(1); err != nil {
			return err
		}
		op = func(b backend.Box) error { return b.RemoveSnapshot(ctx, rest[0]) }
	case "restore":
		if err := need(1); err != nil {
			return err
		}
		op = func(b backend.Box) error { return b.RestoreSnapshot(ctx, rest[0]) }
	default:
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "snapshot: unknown subcommand %q\n%s", sub, snapshotUsage)
	}
	return eachBox([]string{box}, op)
}

// cmdClone makes a stopped copy of a stopped box; it prints the new id.
func cmdClone(args []string) error {
	fs := flag.NewFlagSet("clone", flag.ContinueOnError)
	name := fs.String("name", "", "the clone's name")
	snap := fs.String("snapshot", "", "clone this snapshot of BOX instead of its disk")
	pos, err := parseAnywhere(fs, args)
	if err != nil || len(pos) != 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite clone BOX [--name N] [--snapshot S]")
	}
	return eachBox(pos, func(b backend.Box) error {
		c, err := b.Clone(context.Background(), boxlite.CloneOptions{Name: *name, Snapshot: *snap})
		if err == nil {
			fmt.Println(c.ID())
		}
		return err
	})
}

// cmdFork makes running boxes from a running box's state; it prints their ids.
func cmdFork(args []string) error {
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	n := fs.Int("n", 1, "how many forks")
	var names multi
	fs.Var(&names, "name", "a fork's name (repeatable; the first forks get them)")
	pos, err := parseAnywhere(fs, args)
	if err != nil || len(pos) != 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite fork [-n N] [--name N]... BOX")
	}
	return eachBox(pos, func(b backend.Box) error {
		forks, err := b.Fork(context.Background(), *n, names)
		for _, f := range forks {
			fmt.Println(f.ID())
		}
		return err
	})
}

// cmdExport writes a stopped box to an archive; it prints the archive's path.
func cmdExport(args []string) error {
	if len(args) != 2 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite export BOX FILE|DIR")
	}
	return eachBox(args[:1], func(b backend.Box) error {
		p, err := b.Export(context.Background(), args[1])
		if err == nil {
			fmt.Println(p)
		}
		return err
	})
}

// cmdImport makes a stopped box from an archive; it prints the box as `info`
// does. The box is a new one, detached as create's are: of the archive's
// config it keeps the content (image, env, entrypoint and cmd, user,
// working directory); its resources, network and published ports come from
// these flags (create's), else the defaults, never from the archive.
func cmdImport(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	bf := addBoxFlags(fs)
	rm := fs.Bool("rm", false, "remove the box when it stops")
	pos, err := parseAnywhere(fs, args)
	if err != nil || len(pos) != 1 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "usage: boxlite import [--name N] [box options as create] FILE")
	}
	o, err := bf.options("")
	if err != nil {
		return err
	}
	o.Name = "" // an argument of the import, not an option
	opts, err := convert.ImportOptions(o)
	if err != nil {
		return err
	}
	opts = append(opts, boxlite.WithDetach(), boxlite.WithAutoRemove(*rm)) // kept unless --rm, as create
	rt, err := boxlite.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	b, err := rt.ImportBox(context.Background(), pos[0], *bf.name, opts...)
	if err != nil {
		return err
	}
	printJSON(convert.BoxInfo(b.Info()))
	return nil
}
