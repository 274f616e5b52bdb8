// Command boxlite runs commands in microVM boxes. See `boxlite help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/image"
	"github.com/boxlite/boxlite/internal/safetext"
)

// ensureImage returns the image ref from the store, pulling it first (with
// progress on stderr, as stdout is the command's) when the store lacks it.
func ensureImage(rt *boxlite.Runtime, ref string) (image.Image, error) {
	img, err := rt.Images().Get(ref)
	if !errors.Is(err, errdefs.ErrNotFound) || strings.HasPrefix(ref, "sha256:") {
		return img, err
	}
	fmt.Fprintf(os.Stderr, "Pulling %s (not in the store)\n", ref)
	res, err := pull(rt, ref, os.Stderr)
	return res.Image, err
}

// pull pulls ref, showing each layer's bytes on w.
func pull(rt *boxlite.Runtime, ref string, w *os.File) (image.PullResult, error) {
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

// imageArgs are the arguments of each image subcommand: their usage and
// how many (max -1: any number).
var imageArgs = map[string]struct {
	usage    string
	min, max int
}{
	"load": {"PATH", 1, 1}, "ls": {"no argument", 0, 0}, "pull": {"IMAGE", 1, 1},
	"rm": {"IMAGE...", 1, -1}, "prune": {"no argument", 0, 0},
}

// cmdPull is `boxlite pull IMAGE` (image pull).
func cmdPull(args []string) error { return imageCommand("pull", "pull", args) }

func cmdImage(args []string) error {
	sub, err := subcommand("image", args, "load", "ls", "pull", "rm", "prune")
	if err != nil {
		return err
	}
	return imageCommand("image "+sub, sub, args[1:])
}

// imageCommand runs image subcommand sub, as command cmd.
func imageCommand(cmd, sub string, args []string) error {
	want := imageArgs[sub]
	fs := newFlags(cmd)
	all := new(bool)
	if sub == "prune" {
		all = fs.Bool("a", false, "remove every image that no box uses, named or not")
		fs.BoolVar(all, "all", false, "same as -a")
	}
	args, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if len(args) < want.min || (want.max >= 0 && len(args) > want.max) {
		return usageError(cmd, "want %s", want.usage)
	}
	if remote() {
		return imageRemote(cmd, sub, args)
	}
	rt, err := boxlite.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	store := rt.Images()
	switch sub {
	case "load":
		imgs, err := store.Load(context.Background(), args[0])
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
		_, err := pull(rt, args[0], os.Stdout)
		return err
	case "rm":
		var errs []error
		for _, ref := range args {
			if err := rt.RemoveImage(ref); err != nil {
				errs = append(errs, err)
			} else {
				fmt.Printf("Removed %s\n", ref)
			}
		}
		return errors.Join(errs...)
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

// imageRemote is image ls and pull over --url (the server's store); the
// other image commands are its host's.
func imageRemote(cmd, sub string, args []string) error {
	if sub != "ls" && sub != "pull" {
		return notOverURL(cmd)
	}
	rt, _, err := openRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	if sub == "pull" {
		img, err := rt.ImagePull(context.Background(), args[0])
		if err == nil {
			fmt.Printf("Pulled %s (%s) on the server\n", safetext.Line(img.Name), safetext.Line(img.Digest))
		}
		return err
	}
	imgs, err := rt.ImageList(context.Background())
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tLAYERS\tSIZE")
	for _, i := range imgs {
		fmt.Fprintf(tw, "%s\t%.19s\t%d\t%.1f MB\n", safetext.Line(i.Name), safetext.Line(i.Digest), len(i.Layers), float64(i.SizeBytes)/1e6)
	}
	return tw.Flush()
}
