package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// streamBox is a box the stream tests share, made and started once.
func streamBox(t *testing.T) string {
	t.Helper()
	status, body := callJSON(t, "POST", "/v1/boxes", map[string]any{"name": "streams", "memory_mib": 256})
	if status == 409 {
		return "streams"
	}
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := callJSON(t, "POST", "/v1/boxes/streams/start", nil); status != 200 {
		t.Fatalf("start: %d %s", status, body)
	}
	return "streams"
}

func startExec(t *testing.T, box string, argv ...string) string {
	t.Helper()
	status, body := callJSON(t, "POST", "/v1/boxes/"+box+"/exec", map[string]any{"command": argv[0], "args": argv[1:]})
	if status != 201 {
		t.Fatalf("exec: %d %s", status, body)
	}
	var e struct {
		ExecutionID string `json:"execution_id"`
	}
	json.Unmarshal(body, &e)
	return e.ExecutionID
}

func attach(t *testing.T, ctx context.Context, box, id string) (*websocket.Conn, *http.Response, error) {
	url := strings.Replace(srv.url, "http", "ws", 1) + "/v1/boxes/" + box + "/executions/" + id + "/attach"
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if ws != nil {
		ws.SetReadLimit(1 << 20)
	}
	return ws, resp, err
}

// readAll reads an attach to its exit frame: stdout, and the exit code.
func readAll(t *testing.T, ctx context.Context, ws *websocket.Conn) ([]byte, int) {
	t.Helper()
	var out bytes.Buffer
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("attach ended before its exit frame: %v (%d bytes read)", err, out.Len())
		}
		if typ == websocket.MessageBinary {
			if len(data) == 0 || (data[0] != 1 && data[0] != 2) {
				t.Fatalf("binary frame without a channel byte: %q", data)
			}
			if data[0] == 1 {
				out.Write(data[1:])
			}
			continue
		}
		var m struct {
			Type     string `json:"type"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("text frame %q: %v", data, err)
		}
		if m.Type == "exit" {
			return out.Bytes(), m.ExitCode
		}
	}
}

func execStatus(t *testing.T, box, id string) string {
	t.Helper()
	status, body := callJSON(t, "GET", "/v1/boxes/"+box+"/executions/"+id, nil)
	if status != 200 {
		t.Fatalf("execution status: %d %s", status, body)
	}
	var in struct {
		Status string `json:"status"`
	}
	json.Unmarshal(body, &in)
	return in.Status
}

// TestUnreadOutputHoldsTheProcess: with no client, a process printing
// 8 MB is held back by its unread output (the server does not read it
// all into memory); a client that attaches later gets every byte.
func TestUnreadOutputHoldsTheProcess(t *testing.T) {
	box := streamBox(t)
	const size = 8_000_000
	id := startExec(t, box, "head", "-c", strconv.Itoa(size), "/dev/zero")
	time.Sleep(3 * time.Second)
	if s := execStatus(t, box, id); s != "running" {
		t.Fatalf("with nobody reading its output the process is %s, want running (held back)", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, _, err := attach(t, ctx, box, id)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	out, code := readAll(t, ctx, ws)
	if len(out) != size || code != 0 {
		t.Fatalf("read %d bytes, exit %d; want %d, 0", len(out), code, size)
	}
	if s := execStatus(t, box, id); s != "completed" {
		t.Errorf("status after the end: %s", s)
	}
}

// TestReattach: one client at a time (a second gets 409); a client that
// leaves mid-stream leaves the process running, and the next one gets
// the rest, in order, and the exit code.
func TestReattach(t *testing.T) {
	box := streamBox(t)
	id := startExec(t, box, "sh", "-c", "i=0; while [ $i -lt 8000 ]; do echo line $i; i=$((i+1)); done; exit 4")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, _, err := attach(t, ctx, box, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, resp, err := attach(t, ctx, box, id); err == nil || resp == nil || resp.StatusCode != 409 {
		t.Fatalf("a second attach: %v %v, want 409", err, resp)
	}
	var first bytes.Buffer
	for first.Len() < 4_000 {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.MessageBinary && data[0] == 1 {
			first.Write(data[1:])
		}
	}
	ws.CloseNow() // the client vanishes
	time.Sleep(time.Second)
	if s := execStatus(t, box, id); s != "running" && s != "completed" {
		t.Fatalf("after the client left the execution is %s, want running (or completed, its output kept)", s)
	}
	ws2, _, err := attach(t, ctx, box, id)
	if err != nil {
		t.Fatal(err)
	}
	defer ws2.CloseNow()
	rest, code := readAll(t, ctx, ws2)
	if code != 4 {
		t.Fatalf("exit code %d, want 4", code)
	}
	// The second client's output continues the sequence to its end: whole
	// lines from some line on (what the first had in flight may be gone
	// with its socket), none missing or repeated after that.
	lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != "line 7999" {
		t.Fatalf("the second attach ends with %q", lines[len(lines)-1])
	}
	firstLines := strings.Split(first.String(), "\n")
	var start int
	skip := 0
	if !strings.HasPrefix(lines[0], "line ") { // the rest of a line cut between the two
		skip = 1
	}
	if _, err := fmt.Sscanf(lines[skip], "line %d", &start); err != nil {
		t.Fatalf("second attach starts with %q", lines[0])
	}
	seenTo := len(firstLines) - 2
	if start < seenTo {
		t.Fatalf("the second attach repeats output: starts at line %d, the first saw line %d", start, seenTo)
	}
	for i, l := range lines[skip:] {
		if l != fmt.Sprintf("line %d", start+i) {
			t.Fatalf("line %d of the second attach is %q, want line %d", i, l, start+i)
		}
	}
	t.Logf("first attach read %d bytes, the second %d lines from line %d", first.Len(), len(lines), start)
}

// TestKillExecution: DELETE kills and forgets an execution; its attached
// client gets the exit frame.
func TestKillExecution(t *testing.T) {
	box := streamBox(t)
	id := startExec(t, box, "sleep", "600")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, _, err := attach(t, ctx, box, id)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if status, body := callJSON(t, "POST", "/v1/boxes/"+box+"/executions/"+id+"/signal", map[string]any{"signal": 9}); status != 400 {
		t.Errorf("signal 9: %d %s (SIGKILL is DELETE's)", status, body)
	}
	if status, body := callJSON(t, "POST", "/v1/boxes/"+box+"/executions/"+id+"/resize", map[string]any{"cols": 80, "rows": 24}); status != 409 {
		t.Errorf("resize without a tty: %d %s", status, body)
	}
	if status, body := callJSON(t, "DELETE", "/v1/boxes/"+box+"/executions/"+id, nil); status != 204 {
		t.Fatalf("kill: %d %s", status, body)
	}
	if _, code := readAll(t, ctx, ws); code != 137 {
		t.Errorf("exit code after kill: %d, want 137", code)
	}
	if status, _ := callJSON(t, "GET", "/v1/boxes/"+box+"/executions/"+id, nil); status != 404 {
		t.Errorf("a killed execution is still listed: %d", status)
	}
}
