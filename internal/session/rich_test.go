package session

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/errdefs"
)

// events runs a rich cell and returns what Next gave, in order: "out:TEXT",
// "err:TEXT", "result:MAIN:TEXT", and the cell's result.
func events(t *testing.T, s *Python, code string, o RunOptions) ([]string, []Result, CellResult, error) {
	t.Helper()
	o.Rich = true
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	c, err := s.RunStreamOpts(context.Background(), code, o)
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	var evs []string
	var results []Result
	for {
		ch, err := c.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ch.Stream {
		case 1:
			evs = append(evs, "out:"+string(ch.Data))
		case 2:
			evs = append(evs, "err:"+string(ch.Data))
		case StreamResult:
			main := "display"
			if ch.Result.IsMain {
				main = "main"
			}
			evs = append(evs, "result:"+main+":"+ch.Result.Text())
			results = append(results, *ch.Result)
		}
	}
	r, err := c.Result(context.Background())
	return evs, results, r, err
}

func TestRichPythonResults(t *testing.T) {
	s := newTestSession(t, Options{})
	if _, res, _, err := events(t, s, "x = 1", RunOptions{}); err != nil || len(res) != 0 {
		t.Fatalf("x = 1: %v %+v", err, res)
	}
	_, res, r, err := events(t, s, "x + 1", RunOptions{})
	if err != nil || len(res) != 1 || !res[0].IsMain || res[0].Text() != "2" || *r.Value != "2" {
		t.Fatalf("x + 1: %v %+v %+v", err, res, r)
	}

	// _repr_*_ methods, display() in order with prints, raw bundles, IPython.display.
	code := `class Rich:
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_png_(self): return b"\x89PNG"
    def _repr_json_(self): return {"a": [1, 2]}
    def _repr_latex_(self): return ("$x$", {})
    def _repr_markdown_(self): raise ValueError("no markdown")
    def __repr__(self): return "Rich()"
print("before")
display(Rich())
print("after")
display({"text/latex": r"\text{raw}"}, raw=True)
from IPython.display import HTML
HTML("<i>last</i>")`
	evs, res, r, err := events(t, s, code, RunOptions{})
	if err != nil || r.Error != nil {
		t.Fatalf("rich: %v %+v", err, r.Error)
	}
	want := []string{"out:before\n", "result:display:Rich()", "out:after\n", "result:display:", "result:main:"}
	var got []string
	for _, e := range evs {
		if !strings.HasPrefix(e, "err:") {
			got = append(got, e)
		}
	}
	if len(got) != len(want) || strings.Join(got[:4], "|") != strings.Join(want[:4], "|") || !strings.HasPrefix(got[4], want[4]) {
		t.Fatalf("events %q, want %q", got, want)
	}
	d := res[0].Data
	if d["text/html"] != "<b>rich</b>" || d["image/png"] != base64.StdEncoding.EncodeToString([]byte("\x89PNG")) ||
		d["application/json"] != `{"a": [1, 2]}` || d["text/latex"] != "$x$" || d["text/markdown"] != "" {
		t.Fatalf("bundle %q", d)
	}
	if !strings.Contains(strings.Join(evs, ""), "_repr_markdown_ failed: ValueError: no markdown") {
		t.Fatalf("no note of the failed repr: %q", evs)
	}
	if len(res[1].Data) != 1 || res[1].Data["text/latex"] != `\text{raw}` {
		t.Fatalf("raw bundle %q", res[1].Data)
	}
	if res[2].Data["text/html"] != "<i>last</i>" || !res[2].IsMain {
		t.Fatalf("IPython.display.HTML %+v", res[2])
	}

	// Errors, "!cmd", the env of one cell, figures.
	_, _, r, _ = events(t, s, "1/0", RunOptions{})
	if r.Error == nil || r.Error.Type != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "1/0") {
		t.Fatalf("1/0: %+v", r.Error)
	}
	evs, _, _, _ = events(t, s, "!echo hi from sh\nimport os\nprint(os.environ['BX_CELL'])", RunOptions{Env: map[string]string{"BX_CELL": "one"}})
	// Output chunks may coalesce (a busy host): compare the stream's bytes.
	if strings.ReplaceAll(strings.Join(evs, ""), "out:", "") != "hi from sh\none\n" {
		t.Fatalf("!echo and env: %q", evs)
	}
	if _, res, _, _ = events(t, s, "import os\nos.environ.get('BX_CELL')", RunOptions{}); len(res) != 0 {
		t.Fatalf("the env of the cell before stayed: %+v", res)
	}
	// A stand-in pyplot: the open figures become PNG results and are closed.
	fake := `import sys, types
plt = types.ModuleType("matplotlib.pyplot")
class Fig:
    def savefig(self, f, format, bbox_inches): f.write(b"fakepng")
    def __repr__(self): return "<Figure size 640x480 with 1 Axes>"
open_figs = [1]
plt.get_fignums = lambda: list(open_figs)
plt.figure = lambda n: Fig()
plt.close = lambda which: open_figs.clear()
plt.show = lambda: None
sys.modules["matplotlib.pyplot"] = plt`
	if _, res, _, _ = events(t, s, fake, RunOptions{}); len(res) != 1 || res[0].Data["image/png"] != base64.StdEncoding.EncodeToString([]byte("fakepng")) || res[0].IsMain {
		t.Fatalf("figure: %+v", res)
	}
	if _, res, _, _ = events(t, s, "open_figs.append(2)\nplt.show()\nprint('shown')", RunOptions{}); len(res) != 1 {
		t.Fatalf("plt.show(): %+v", res)
	}

	// A plain cell (CodeBox.run) has no results; display() prints there.
	r2, err := s.Run(context.Background(), "display(41 + 1)\n5", 10*time.Second)
	if err != nil || string(r2.Stdout) != "42\n" || len(r2.Results) != 0 || *r2.Value != "5" {
		t.Fatalf("plain cell: %v %+v", err, r2)
	}
}

func newJSSession(t *testing.T) *Python {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("no node on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := NewJavaScript(ctx, localStarter(t), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestJavaScriptSession(t *testing.T) {
	s := newJSSession(t)
	if !strings.HasPrefix(s.PythonVersion(), "v") {
		t.Fatalf("version %q", s.PythonVersion())
	}
	events(t, s, "let x = 1; function twice(v) { return 2 * v }", RunOptions{})
	evs, res, r, err := events(t, s, "console.log('log'); console.error('warn'); twice(x) + 1", RunOptions{})
	if err != nil || strings.Join(evs, "|") != "out:log\n|err:warn\n|result:main:3" || *r.Value != "3" || len(res) != 1 {
		t.Fatalf("state: %v %q %+v", err, evs, r)
	}
	if _, res, _, _ = events(t, s, "'text'", RunOptions{}); res[0].Text() != "'text'" {
		t.Fatalf("string: %+v", res)
	}
	if _, res, _, _ = events(t, s, "new Promise(r => setTimeout(() => r({a: 1}), 50))", RunOptions{}); res[0].Text() != "{ a: 1 }" {
		t.Fatalf("promise: %+v", res)
	}
	_, _, r, _ = events(t, s, "null.foo", RunOptions{})
	if r.Error == nil || r.Error.Type != "TypeError" || !strings.Contains(r.Error.Traceback, "<cell-") || strings.Contains(r.Error.Traceback, "boxlite-session") {
		t.Fatalf("error: %+v", r.Error)
	}
	evs, res, _, _ = events(t, s, "display({'text/html': '<b>x</b>'}, {raw: true}); process.env.BX_CELL", RunOptions{Env: map[string]string{"BX_CELL": "js"}})
	if len(res) != 2 || res[0].Data["text/html"] != "<b>x</b>" || res[1].Text() != "'js'" {
		t.Fatalf("display and env: %q %+v", evs, res)
	}
	if _, res, _, _ = events(t, s, "process.env.BX_CELL", RunOptions{}); len(res) != 0 {
		t.Fatalf("the env of the cell before stayed: %+v", res)
	}
	// A child process writing to the inherited stdout is the cell's stderr.
	evs, _, _, _ = events(t, s, "require('child_process').execSync('echo child', {stdio: 'inherit'}); 1", RunOptions{})
	if !strings.Contains(strings.Join(evs, ""), "child") {
		t.Fatalf("child output: %q", evs)
	}

	// A timeout interrupts a busy loop and the state stays; so does an await.
	_, _, r, err = events(t, s, "while (true) {}", RunOptions{Timeout: 2 * time.Second})
	if !errors.Is(err, errdefs.ErrTimeout) || !r.TimedOut || r.Restarted {
		t.Fatalf("busy loop: %v %+v", err, r)
	}
	_, _, r, err = events(t, s, "await new Promise(() => {})", RunOptions{Timeout: 2 * time.Second})
	if !errors.Is(err, errdefs.ErrTimeout) || r.Restarted {
		t.Fatalf("await: %v %+v", err, r)
	}
	if _, res, _, _ = events(t, s, "x", RunOptions{}); len(res) != 1 || res[0].Text() != "1" {
		t.Fatalf("state after interrupts: %+v", res)
	}
	if err := s.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, r, _ = events(t, s, "x", RunOptions{}); r.Error == nil || r.Error.Type != "ReferenceError" {
		t.Fatalf("after reset: %+v", r)
	}
}
