package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/boxlite/boxlite/internal/hv"
)

// Row is one figure of a run. Baseline, when set, is the same quantity
// measured in the same run by a reference (bare QEMU, the guest's own
// spawn, ...): these machines are noisy, so Ratio (Value/BaseValue) is what
// to compare across runs.
type Row struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Baseline  string  `json:"baseline,omitempty"` // what BaseValue measures
	BaseValue float64 `json:"baseline_value,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// Goal is issue 12's bound on Ratio (on Value for a row without a
	// baseline); Met says whether this run meets it.
	Goal  *Goal  `json:"goal,omitempty"`
	Met   *bool  `json:"met,omitempty"`
	Accel string `json:"accel"`
}

// Goal bounds a row: at most Max or at least Min (the other is zero).
type Goal struct {
	Max float64 `json:"max,omitempty"`
	Min float64 `json:"min,omitempty"`
}

func atMost(x float64) *Goal  { return &Goal{Max: x} }
func atLeast(x float64) *Goal { return &Goal{Min: x} }

func (g *Goal) String() string {
	if g.Max != 0 {
		return fmt.Sprintf("<= %g", g.Max)
	}
	return fmt.Sprintf(">= %g", g.Min)
}

// recorder collects a mode's rows, prints each as it comes and, at the end,
// the table; save merges them into build/bench.json under the mode's name.
type recorder struct {
	mode   string
	accel  hv.Accel
	reason string
	start  time.Time
	rows   []Row
}

// rec is the running mode's recorder (main sets it up).
var rec *recorder

func newRecorder(mode string) (*recorder, error) {
	accel, reason, err := hv.DetectAccel()
	if err != nil {
		return nil, err
	}
	fmt.Printf("bench %s: acceleration %s (%s)\n", mode, accel, reason)
	return &recorder{mode: mode, accel: accel, reason: reason, start: time.Now()}, nil
}

// add records a figure without a baseline.
func (r *recorder) add(name string, value float64, unit string, goal *Goal) {
	r.addRow(Row{Name: name, Value: value, Unit: unit, Goal: goal})
}

// vs records a figure next to its in-run baseline (same unit).
func (r *recorder) vs(name string, value float64, unit, baseline string, base float64, goal *Goal) {
	r.addRow(Row{Name: name, Value: value, Unit: unit, Baseline: baseline, BaseValue: base, Goal: goal})
}

// addRow fills in Ratio, Met and Accel and records the row.
func (r *recorder) addRow(row Row) {
	row.Accel = string(r.accel)
	if row.Baseline != "" && row.BaseValue != 0 {
		row.Ratio = row.Value / row.BaseValue
	}
	if row.Goal != nil {
		x := row.Value
		if row.Baseline != "" {
			x = row.Ratio
		}
		met := (row.Goal.Max == 0 || x <= row.Goal.Max) && (row.Goal.Min == 0 || x >= row.Goal.Min)
		row.Met = &met
	}
	r.rows = append(r.rows, row)
	fmt.Println(" ", rowLine(row))
}

func rowLine(row Row) string {
	s := fmt.Sprintf("%s: %s", row.Name, num(row.Value, row.Unit))
	if row.Baseline != "" {
		s += fmt.Sprintf("  (%s: %s; ratio %.2fx)", row.Baseline, num(row.BaseValue, row.Unit), row.Ratio)
	}
	return s
}

func num(v float64, unit string) string {
	switch a := math.Abs(v); {
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f %s", v, unit)
	case a >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// table prints every row of the run, goals last.
func (r *recorder) table() {
	fmt.Printf("\nbench %s (%s):\n", r.mode, r.accel)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "what\tvalue\tbaseline\tratio\tgoal\tmet")
	for _, row := range r.rows {
		base, ratio, goal, met := "", "", "", ""
		if row.Baseline != "" {
			base = row.Baseline + " " + num(row.BaseValue, row.Unit)
			ratio = fmt.Sprintf("%.2fx", row.Ratio)
		}
		if row.Goal != nil {
			goal, met = row.Goal.String(), map[bool]string{true: "yes", false: "NO"}[*row.Met]
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Name, num(row.Value, row.Unit), base, ratio, goal, met)
	}
	w.Flush()
}

// benchFile is build/bench.json: each mode's last run, by mode name, so the
// modes of `make bench` all land in one file.
type benchFile map[string]modeRun

type modeRun struct {
	When      time.Time `json:"when"`
	Accel     string    `json:"accel"`
	Reason    string    `json:"accel_reason"`
	Host      string    `json:"host"` // GOARCH and CPU count
	Seconds   float64   `json:"seconds"`
	Rows      []Row     `json:"rows"`
	GitCommit string    `json:"git_commit,omitempty"`
}

// benchPath is the repository's build/bench.json (BOXLITE_BENCH_JSON overrides).
func benchPath() string {
	if p := os.Getenv("BOXLITE_BENCH_JSON"); p != "" {
		return p
	}
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "build", "bench.json")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "bench.json")
		}
	}
}

// save prints the table and merges this mode's rows into bench.json.
func (r *recorder) save() error {
	r.table()
	path := benchPath()
	all := benchFile{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &all); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v; starting it anew\n", path, err)
			all = benchFile{}
		}
	}
	all[r.mode] = modeRun{When: r.start.UTC(), Accel: string(r.accel), Reason: r.reason,
		Host: fmt.Sprintf("%s, %d CPUs", runtime.GOARCH, runtime.NumCPU()), Seconds: time.Since(r.start).Seconds(),
		Rows: r.rows, GitCommit: gitCommit()}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Printf("bench %s: %d rows in %s\n", r.mode, len(r.rows), path)
	return nil
}

// gitCommit is the checkout's HEAD, empty when git cannot tell.
func gitCommit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
