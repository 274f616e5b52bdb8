package main

import (
	"context"
	"flag"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/backend"
)

const cpUsage = "usage: boxlite cp [-L] [--no-overwrite] SRC DST (one of them BOX:PATH)"

// cmdCp copies between the host and a running box, as docker cp does.
func cmdCp(args []string) error {
	fs := flag.NewFlagSet("cp", flag.ContinueOnError)
	follow := fs.Bool("L", false, "follow a symlink named as SRC")
	noOverwrite := fs.Bool("no-overwrite", false, "fail when the destination exists")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, cpUsage)
	}
	srcBox, src := boxPath(fs.Arg(0))
	dstBox, dst := boxPath(fs.Arg(1))
	if (srcBox == "") == (dstBox == "") {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "cp: exactly one of SRC and DST is BOX:PATH\n%s", cpUsage)
	}
	opts := boxlite.CopyOptions{FollowSymlinks: *follow, NoOverwrite: *noOverwrite}
	return eachBox([]string{srcBox + dstBox}, func(b backend.Box) error {
		if srcBox != "" {
			return b.CopyOut(context.Background(), src, dst, opts)
		}
		return b.CopyIn(context.Background(), src, dst, opts)
	})
}

// boxPath splits BOX:PATH; a host path (one with a "/" before any ":", or
// none) gives an empty box.
func boxPath(arg string) (box, p string) {
	b, rest, ok := strings.Cut(arg, ":")
	if !ok || b == "" || strings.Contains(b, "/") {
		return "", arg
	}
	return b, rest
}
