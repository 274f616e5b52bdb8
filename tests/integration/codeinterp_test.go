package integration

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/e2b/codeinterp"
	"github.com/boxlite/boxlite/tests/internal/boxtest"
)

// Code contexts (Box.NewCodeContext) and E2B's code interpreter API over
// them, in one python:slim box.
func TestCodeContexts(t *testing.T) {
	t.Parallel()
	needPython(t)
	ctx := context.Background()
	b, err := boxtest.CreateStarted(ctx, rt, "python:slim")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, true)
	newCtx := func(t *testing.T, lang string) *boxlite.CodeContext {
		t.Helper()
		start := time.Now()
		c, err := b.NewCodeContext(ctx, lang, boxlite.SessionOptions{Grace: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s context started in %.2fs", lang, time.Since(start).Seconds())
		t.Cleanup(func() { c.Close() })
		return c
	}
	runCode := func(t *testing.T, c *boxlite.CodeContext, code string) *boxlite.CodeExecution {
		t.Helper()
		ex, err := c.RunCode(ctx, code, &boxlite.RunCodeOptions{Timeout: 3 * time.Minute})
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		return ex
	}

	t.Run("python", func(t *testing.T) {
		c := newCtx(t, "python")
		runCode(t, c, "x = 1")
		ex := runCode(t, c, "x + 1")
		if ex.Text() != "2" || len(ex.Results) != 1 || !ex.Results[0].IsMain || ex.ExecutionCount != 2 {
			t.Fatalf("x + 1: %+v", ex)
		}
		ex = runCode(t, c, "print('out')\n1/0")
		if ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || ex.Error.Value != "division by zero" ||
			!strings.Contains(ex.Error.Traceback, "1/0") || strings.Join(ex.Logs.Stdout, "") != "out\n" {
			t.Fatalf("1/0: %+v %+v", ex.Error, ex.Logs)
		}
		var streamed []string
		ex, err := c.RunCode(ctx, "class H:\n    def _repr_html_(self): return '<b>h</b>'\n"+
			"for i in range(3): print(i, flush=True)\ndisplay(H())\nH()", &boxlite.RunCodeOptions{
			OnStdout: func(s string) { streamed = append(streamed, "out:"+s) },
			OnResult: func(r boxlite.CodeResult) { streamed = append(streamed, "result:"+r.Data["text/html"]) },
		})
		if err != nil || len(ex.Results) != 2 || ex.Results[1].Data["text/html"] != "<b>h</b>" || !ex.Results[1].IsMain {
			t.Fatalf("html: %v %+v", err, ex)
		}
		if s := strings.Join(streamed, "|"); !strings.HasSuffix(s, "2\n|result:<b>h</b>|result:<b>h</b>") || !strings.HasPrefix(s, "out:0") {
			t.Fatalf("streamed %q", s)
		}
		t.Run("matplotlib", func(t *testing.T) {
			ex := runCode(t, c, "import importlib.util\nimportlib.util.find_spec('matplotlib') is not None")
			if ex.Text() != "True" {
				t.Fatal("the python:slim test image has no matplotlib (tests/images/python-rootfs.sh installs it): rebuild it with `make images`")
			}
			ex = runCode(t, c, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')")
			var png string
			for _, r := range ex.Results {
				if p := r.Data["image/png"]; p != "" {
					png = p
				}
			}
			raw, err := base64.StdEncoding.DecodeString(png)
			if err != nil || !strings.HasPrefix(string(raw), "\x89PNG") || ex.Error != nil {
				t.Fatalf("no PNG figure: %v %+v %+v", err, ex.Error, ex.Logs)
			}
			t.Logf("figure: %d bytes of PNG, results %d", len(raw), len(ex.Results))
		})
		t.Run("timeout keeps state, restart clears it", func(t *testing.T) {
			_, err := c.RunCode(ctx, "import time\ntime.sleep(60)", &boxlite.RunCodeOptions{Timeout: 3 * time.Second})
			if !errors.Is(err, errdefs.ErrTimeout) {
				t.Fatalf("timeout: %v", err)
			}
			if ex := runCode(t, c, "x"); ex.Text() != "1" {
				t.Fatalf("after the timeout: %+v", ex)
			}
			if err := c.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			ex := runCode(t, c, "x")
			if ex.Error == nil || ex.Error.Name != "NameError" || ex.ExecutionCount != 1 {
				t.Fatalf("after restart: %+v", ex)
			}
		})
	})

	t.Run("bash", func(t *testing.T) {
		c := newCtx(t, "bash")
		runCode(t, c, "cd /tmp\nX=5\nf() { echo \"f:$1\"; }")
		ex := runCode(t, c, "echo $X $PWD; f 7")
		if got := strings.Join(ex.Logs.Stdout, ""); got != "5 /tmp\nf:7\n" || ex.Error != nil {
			t.Fatalf("state: %q %+v", got, ex.Error)
		}
		ex, err := c.RunCode(ctx, "echo $ONLY_HERE; (exit 3)", &boxlite.RunCodeOptions{Env: map[string]string{"ONLY_HERE": "yes"}})
		if err != nil || strings.Join(ex.Logs.Stdout, "") != "yes\n" || ex.Error == nil || ex.Error.Name != "ExitCode" || ex.Error.Value != "3" {
			t.Fatalf("env and exit code: %v %+v %+v", err, ex.Logs, ex.Error)
		}
		if ex := runCode(t, c, "echo \"[$ONLY_HERE]\" $X"); strings.Join(ex.Logs.Stdout, "") != "[] 5\n" {
			t.Fatalf("env stayed: %+v", ex.Logs)
		}
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if ex := runCode(t, c, "echo \"[$X]\""); strings.Join(ex.Logs.Stdout, "") != "[]\n" {
			t.Fatalf("after restart: %+v", ex.Logs)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		c := newCtx(t, "javascript")
		runCode(t, c, "const x = 1; var seen = []")
		ex := runCode(t, c, "seen.push('a'); console.log('log', x); x + 1")
		if ex.Text() != "2" || strings.Join(ex.Logs.Stdout, "") != "log 1\n" {
			t.Fatalf("x + 1: %+v", ex)
		}
		ex = runCode(t, c, "null.f")
		if ex.Error == nil || ex.Error.Name != "TypeError" {
			t.Fatalf("error: %+v", ex.Error)
		}
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if ex := runCode(t, c, "typeof seen"); ex.Text() != "'undefined'" {
			t.Fatalf("after restart: %+v", ex)
		}
	})

	t.Run("e2b http", func(t *testing.T) { testCodeInterpHTTP(t, b) })
}

// line is one line of /execute's stream.
type line map[string]any

func execute(t *testing.T, ctx context.Context, url string, body any) ([]line, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/execute", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("execute %s: %s", b, resp.Status)
	}
	var lines []line
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if l["type"] != "keepalive" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&sb)
	return resp.StatusCode, sb.String()
}

func testCodeInterpHTTP(t *testing.T, b *boxlite.Box) {
	h := codeinterp.New(b)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()

	if _, err := execute(t, ctx, srv.URL, map[string]any{"code": "y = 41"}); err != nil {
		t.Fatal(err)
	}
	lines, err := execute(t, ctx, srv.URL, map[string]any{"code": "print('hi')\ny + 1", "language": "python", "env_vars": map[string]string{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, l := range lines {
		types = append(types, l["type"].(string))
	}
	if strings.Join(types, ",") != "stdout,result,number_of_executions,end_of_execution" ||
		lines[0]["text"] != "hi\n" || lines[1]["text"] != "42" || lines[1]["is_main_result"] != true || lines[2]["execution_count"] != 2.0 {
		t.Fatalf("lines %v", lines)
	}
	if lines, _ = execute(t, ctx, srv.URL, map[string]any{"code": "'quoted'"}); lines[0]["text"] != "quoted" {
		t.Fatalf("a string's quotes: %v", lines)
	}
	lines, _ = execute(t, ctx, srv.URL, map[string]any{"code": "1/0"})
	if lines[0]["type"] != "error" || lines[0]["name"] != "ZeroDivisionError" || !strings.Contains(lines[0]["traceback"].(string), "1/0") {
		t.Fatalf("error lines %v", lines)
	}

	// contexts: create, list, run in one, restart, remove
	code, body := do(t, "POST", srv.URL+"/contexts", `{"language": "bash", "cwd": "/tmp"}`)
	var info struct{ ID, Language, Cwd string }
	if code != 200 || json.Unmarshal([]byte(body), &info) != nil || info.Language != "bash" || info.Cwd != "/tmp" {
		t.Fatalf("create: %d %s", code, body)
	}
	_, body = do(t, "GET", srv.URL+"/contexts", "")
	if !strings.Contains(body, info.ID) || !strings.Contains(body, `"language":"python"`) || !strings.Contains(body, `"language":"javascript"`) {
		t.Fatalf("list: %s", body)
	}
	lines, _ = execute(t, ctx, srv.URL, map[string]any{"code": "Z=3; pwd", "context_id": info.ID})
	if lines[0]["text"] != "/tmp\n" {
		t.Fatalf("bash context: %v", lines)
	}
	if code, _ = do(t, "POST", srv.URL+"/contexts/"+info.ID+"/restart", ""); code != 200 {
		t.Fatalf("restart: %d", code)
	}
	lines, _ = execute(t, ctx, srv.URL, map[string]any{"code": "echo \"[$Z]\"", "context_id": info.ID})
	if lines[0]["text"] != "[]\n" {
		t.Fatalf("after restart: %v", lines)
	}
	if code, _ = do(t, "DELETE", srv.URL+"/contexts/"+info.ID, ""); code != 200 {
		t.Fatalf("remove: %d", code)
	}
	if code, _ = do(t, "DELETE", srv.URL+"/contexts/"+info.ID, ""); code != 404 {
		t.Fatalf("remove twice: %d", code)
	}

	// bad requests change nothing
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/execute", `{"code": 1}`, 400},
		{"POST", "/execute", `{"code": "1", "bogus": true}`, 400},
		{"POST", "/execute", `{"code": "1", "context_id": "x", "language": "python"}`, 400},
		{"POST", "/execute", `{"code": "1", "context_id": "nope"}`, 404},
		{"POST", "/execute", `{"code": "1", "language": "cobol"}`, 400},
		{"POST", "/execute", `{"code": "1", "env_vars": {"A=B": "c"}}`, 200}, // the cell fails, see below
		{"POST", "/execute", `{`, 400},
		{"POST", "/execute", `{"code": "` + strings.Repeat("a", 17<<20) + `"}`, 413},
		{"GET", "/execute", ``, 405},
		{"POST", "/contexts", `{"language": "cobol"}`, 400},
		{"PUT", "/contexts", ``, 405},
		{"POST", "/contexts/nope/restart", ``, 404},
		{"GET", "/nope", ``, 404},
	} {
		if code, body := do(t, c.method, srv.URL+c.path, c.body); code != c.want {
			t.Errorf("%s %s %.80s: %d %.200s, want %d", c.method, c.path, c.body, code, body, c.want)
		}
	}

	// Random malformed requests: never a 5xx, and the server works after them.
	rng := rand.New(rand.NewPCG(22, 49999))
	paths := []string{"/execute", "/contexts", "/contexts/x/restart", "/contexts/%00", "/contexts//restart", "/health", "/", "/execute/x"}
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH"}
	for i := 0; i < 300; i++ {
		body := make([]byte, rng.IntN(64))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		if rng.IntN(2) == 0 { // JSON-ish, wrong in some way
			body = []byte([]string{`{"code": null}`, `{"code": ["x"]}`, `{"language": 5}`, `{"context_id": {}}`, `[]`, `"x"`,
				`{"env_vars": {"": "x"}, "code": "1"}`, `{"cwd": 1}`, `{"code": "1"} {"code": "2"}`}[rng.IntN(9)])
		}
		m, pth := methods[rng.IntN(len(methods))], paths[rng.IntN(len(paths))]
		req, _ := http.NewRequest(m, srv.URL+pth, strings.NewReader(string(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s %q: %v", m, pth, body, err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("%s %s %q: %s", m, pth, body, resp.Status)
		}
	}

	// A client that goes away interrupts its cell: the context is free at once.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = execute(t, cctx, srv.URL, map[string]any{"code": "import time\ntime.sleep(600)"})
	cancel()
	if err == nil {
		t.Fatal("the sleeping cell's stream ended before the client's deadline")
	}
	start := time.Now()
	lines, err = execute(t, ctx, srv.URL, map[string]any{"code": "y"})
	if err != nil || lines[0]["text"] != "41" {
		t.Fatalf("after the interrupt: %v %v", err, lines)
	}
	t.Logf("the cell after an abandoned one answered in %.2fs", time.Since(start).Seconds())
}
