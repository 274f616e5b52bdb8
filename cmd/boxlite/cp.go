package main

import (
	"context"
	"strings"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/backend"
)

// cmdCp copies between the host and a running box, as docker cp does.
func cmdCp(args []string) error {
	fs := newFlags("cp")
	follow := fs.Bool("L", false, "follow a symlink named as SRC")
	fs.BoolVar(follow, "follow-link", false, "same as -L")
	noOverwrite := fs.Bool("no-overwrite", false, "fail when the destination exists")
	pos, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("cp", "want SRC DST, one of them BOX:PATH")
	}
	srcBox, src := boxPath(pos[0])
	dstBox, dst := boxPath(pos[1])
	if (srcBox == "") == (dstBox == "") {
		return usageError("cp", "exactly one of SRC and DST is BOX:PATH")
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
