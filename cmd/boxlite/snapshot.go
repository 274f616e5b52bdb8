package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/abi/convert"
	"github.com/boxlite/boxlite/internal/backend"
)

// cmdSnapshot manages snapshots of a box: its disk, and with create
// --memory its memory too.
func cmdSnapshot(args []string) error {
	if _, err := subcommand("snapshot", args, "create", "ls", "list", "rm", "remove", "restore"); err != nil {
		return err
	}
	cmd := "snapshot " + args[0]
	fs := newFlags(cmd)
	var memory *bool
	if args[0] == "create" {
		memory = fs.Bool("memory", false, "keep the box's memory too (a running or paused box); a restore brings it back paused")
	}
	pos, err := parseArgs(fs, args[1:], true)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(cmd, "no BOX given")
	}
	sub, box, rest := args[0], pos[0], pos[1:]
	ctx := context.Background()
	need := func(n int) error {
		if len(rest) != n {
			return usageError(cmd, "want %s", map[int]string{0: "BOX", 1: "BOX NAME"}[n])
		}
		return nil
	}
	var op func(backend.Box) error
	switch sub {
	case "create":
		if len(rest) > 1 {
			return usageError(cmd, "want BOX [NAME]")
		}
		name := ""
		if len(rest) == 1 {
			name = rest[0]
		}
		op = func(b backend.Box) error {
			si, err := b.CreateSnapshotWith(ctx, name, boxlite.SnapshotOptions{Memory: *memory})
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
	}
	return eachBox([]string{box}, op)
}

// cmdClone makes a stopped copy of a stopped box (or a paused one of a
// memory snapshot); it prints the new id.
func cmdClone(args []string) error {
	fs := newFlags("clone")
	name := fs.String("name", "", "the clone's `NAME`")
	snap := fs.String("snapshot", "", "clone `SNAPSHOT` of BOX instead of its disk")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("clone", "want one BOX")
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
	fs := newFlags("fork")
	n := fs.Int("n", 1, "how many forks (`N`)")
	var names multi
	fs.Var(&names, "name", "a fork's `NAME` (repeatable; the first forks get them)")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("fork", "want one BOX")
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
	args, err := parseArgs(newFlags("export"), args, true)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usageError("export", "want BOX FILE|DIR")
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
	fs := newFlags("import")
	bf := addBoxFlags(fs)
	rm := fs.Bool("rm", false, "remove the box when it stops")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("import", "want one FILE")
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
