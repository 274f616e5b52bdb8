package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
)

// boxStats is one row of `boxlite stats`, and its --json form.
type boxStats struct {
	ID      string             `json:"id"`
	Name    string             `json:"name,omitempty"`
	Metrics boxlite.BoxMetrics `json:"metrics"`
}

// cmdStats prints the metrics of the named boxes, or of every running box,
// once (docker stats --no-stream; there is no streaming mode).
func cmdStats(args []string) error {
	fs := newFlags("stats")
	asJSON := fs.Bool("json", false, "print a JSON array of {id, name, metrics}")
	once := fs.Bool("no-stream", true, "print once (the only mode; accepted as docker's)")
	names, err := parseArgs(fs, args, true)
	if err != nil {
		return err
	}
	if !*once {
		return errdefs.Errorf(errdefs.ErrUnsupported, "stats: streaming is not implemented; stats prints once")
	}
	rt, err := boxlite.NewRuntime()
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx := context.Background()
	if len(names) == 0 {
		infos, err := rt.List(ctx)
		if err != nil {
			return err
		}
		for _, i := range infos {
			if i.State == boxlite.StateRunning {
				names = append(names, i.ID)
			}
		}
	}
	rows := []boxStats{}
	var errs []error
	for _, n := range names {
		b, err := rt.Get(ctx, n)
		var m boxlite.BoxMetrics
		if err == nil {
			m, err = b.Metrics(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stats %s: %w", n, err))
			continue
		}
		rows = append(rows, boxStats{ID: b.ID(), Name: b.Name(), Metrics: m})
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Println(string(out))
	} else {
		printStats(os.Stdout, rows)
	}
	return errors.Join(errs...)
}

// printStats writes rows as a table; NET RX/TX are from the box's side
// (RX: what its network received from the host and beyond).
func printStats(w io.Writer, rows []boxStats) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tCPU %\tMEM\tEXECS\tEXEC ERRORS\tNET RX / TX")
	for _, r := range rows {
		m := r.Metrics
		name := r.Name
		if name == "" {
			name = r.ID
		}
		cpu, mem, netIO := "-", "-", "-"
		if m.CPUPercent != nil {
			cpu = fmt.Sprintf("%.1f%%", *m.CPUPercent)
		}
		if m.MemoryBytes != nil {
			mem = humanBytes(*m.MemoryBytes)
		}
		if m.NetworkBytesSent != nil && m.NetworkBytesReceived != nil {
			netIO = humanBytes(*m.NetworkBytesSent) + " / " + humanBytes(*m.NetworkBytesReceived)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", name, r.ID, cpu, mem, m.CommandsExecutedTotal, m.ExecErrorsTotal, netIO)
	}
	tw.Flush()
}

// humanBytes is n in binary units, as docker stats shows memory.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v, i = v/unit, i+1
	}
	return fmt.Sprintf("%.1f%s", v, []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i])
}
