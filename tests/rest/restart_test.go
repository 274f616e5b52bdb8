package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// restartHome is a server home of the restart test's own: its server is
// killed and started again, which the other tests' server must not see.
type restartHome struct {
	t   *testing.T
	dir string
	srv *server // the one running, if any
}

func (h *restartHome) cli(args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "build", "boxlite"), args...)
	cmd.Env = append(os.Environ(), "BOXLITE_HOME="+h.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("boxlite %q: %v: %s", args, err, out)
	}
	return string(out)
}

// start starts a server on the home (the same key file, state and boxes).
func (h *restartHome) start() {
	h.t.Helper()
	old := home
	home = h.dir // startServer takes the home from there
	s, err := startServer()
	home = old
	if err != nil {
		h.t.Fatal(err)
	}
	h.srv = s
}

func (h *restartHome) call(method, path string, v any) (int, []byte) {
	h.t.Helper()
	var body io.Reader
	if v != nil {
		data, _ := json.Marshal(v)
		body = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, h.srv.url+path, body)
	req.Header.Set("Authorization", "Bearer "+key)
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data
}

func (h *restartHome) box(name string) {
	h.t.Helper()
	if status, body := h.call("POST", "/v1/boxes", map[string]any{"name": name, "memory_mib": 256}); status != 201 {
		h.t.Fatalf("create %s: %d %s", name, status, body)
	}
	if status, body := h.call("POST", "/v1/boxes/"+name+"/start", nil); status != 200 {
		h.t.Fatalf("start %s: %d %s", name, status, body)
	}
}

func (h *restartHome) exec(box string, argv ...string) string {
	h.t.Helper()
	status, body := h.call("POST", "/v1/boxes/"+box+"/exec", map[string]any{"command": argv[0], "args": argv[1:]})
	if status != 201 {
		h.t.Fatalf("exec: %d %s", status, body)
	}
	var e struct {
		ExecutionID string `json:"execution_id"`
	}
	json.Unmarshal(body, &e)
	return e.ExecutionID
}

func (h *restartHome) info(path string) map[string]any {
	h.t.Helper()
	status, body := h.call("GET", path, nil)
	if status != 200 {
		h.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	return m
}

func (h *restartHome) attach(ctx context.Context, box, id string) *websocket.Conn {
	h.t.Helper()
	url := strings.Replace(h.srv.url, "http", "ws", 1) + "/v1/boxes/" + box + "/executions/" + id + "/attach"
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		h.t.Fatalf("attach %s: %v", id, err)
	}
	ws.SetReadLimit(1 << 20)
	return ws
}

// lines reads stdout lines from an attach until it has want of them in
// all, the exit frame (code returned, else -1) or the end of the
// connection (a killed server).
func lines(ctx context.Context, ws *websocket.Conn, got *[]string, partial *string, want int) (code int) {
	for len(*got) < want {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return -1
		}
		if typ == websocket.MessageBinary {
			if data[0] == 1 {
				parts := strings.Split(*partial+string(data[1:]), "\n")
				*got = append(*got, parts[:len(parts)-1]...)
				*partial = parts[len(parts)-1] // "" after a whole line
			}
			continue
		}
		var m struct {
			Type     string `json:"type"`
			ExitCode int    `json:"exit_code"`
		}
		if json.Unmarshal(data, &m) == nil && m.Type == "exit" {
			return m.ExitCode
		}
	}
	return -1
}

// TestRestartKeepsExecutions: an execution printing numbered lines for
// about 20 s survives its server's SIGKILL and then a graceful stop
// (SIGTERM): each new server on the same home and state attaches to it
// again, the box is still running, and the output continues where the
// client left off, in order, to the right exit code. An execution whose
// box stopped while no server ran is reported lost, not a failure.
func TestRestartKeepsExecutions(t *testing.T) {
	dir, err := os.MkdirTemp("", "bxrestart")
	if err != nil {
		t.Fatal(err)
	}
	h := &restartHome{t: t, dir: dir}
	defer func() {
		if h.srv != nil {
			h.srv.stop()
		}
		for _, b := range []string{"keeps", "goes"} {
			cmd := exec.Command(filepath.Join(repo, "build", "boxlite"), "rm", "-f", b)
			cmd.Env = append(os.Environ(), "BOXLITE_HOME="+dir)
			cmd.Run()
		}
		os.RemoveAll(dir)
	}()
	h.cli("image", "load", os.Getenv("BOXLITE_TEST_IMAGE"))
	h.start()
	h.box("keeps")
	h.box("goes")
	const n = 100
	id := h.exec("keeps", "sh", "-c", fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "line $i"; i=$((i+1)); sleep 0.2; done; exit 5`, n))
	gone := h.exec("goes", "sleep", "600")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var got []string
	var partial string
	ws := h.attach(ctx, "keeps", id)
	lines(ctx, ws, &got, &partial, 10)
	h.srv.cmd.Process.Kill()          // SIGKILL: no goodbye
	lines(ctx, ws, &got, &partial, n) // whatever was on its way, to the end of the connection
	<-h.srv.done
	h.srv = nil
	ws.CloseNow()
	t.Logf("first server killed after %d lines", len(got))
	h.cli("stop", "goes") // its execution is lost with it

	h.start()
	if !strings.Contains(h.srv.log.String(), "1 reattached") || !strings.Contains(h.srv.log.String(), "1 lost") {
		t.Errorf("the new server's startup log does not report 1 reattached, 1 lost:\n%s", h.srv.log.String())
	}
	if st := h.info("/v1/boxes/keeps")["status"]; st != "running" {
		t.Fatalf("box after the restart: %v", st)
	}
	if st := h.info("/v1/boxes/keeps/executions/" + id)["status"]; st != "running" {
		t.Fatalf("execution after the restart: %v", st)
	}
	lost := h.info("/v1/boxes/goes/executions/" + gone)
	if msg, _ := lost["error_message"].(string); lost["status"] != "lost" || !strings.Contains(msg, "restarted") {
		t.Fatalf("execution of the stopped box: %v", lost)
	}
	ws = h.attach(ctx, "keeps", id)
	lines(ctx, ws, &got, &partial, len(got)+10)
	ws.Close(websocket.StatusNormalClosure, "")
	err = h.srv.stop() // SIGTERM: a graceful stop
	h.srv = nil
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second server stopped after %d lines", len(got))

	h.start()
	ws = h.attach(ctx, "keeps", id)
	defer ws.CloseNow()
	code := lines(ctx, ws, &got, &partial, n+1)
	if code != 5 {
		t.Fatalf("exit code %d, want 5 (%d lines)", code, len(got))
	}
	for i, l := range got {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("line %d is %q (of %d lines; a gap or repeat across a restart)", i+1, l, len(got))
		}
	}
	if len(got) != n || partial != "" {
		t.Fatalf("got %d lines (partial %q), want %d", len(got), partial, n)
	}
	if st := h.info("/v1/boxes/keeps/executions/" + id)["status"]; st != "completed" {
		t.Fatalf("execution after its end: %v", st)
	}
}
