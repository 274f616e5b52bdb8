package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// idemCall is a JSON request (nil: no body) with an Idempotency-Key.
func idemCall(t *testing.T, method, path, idemKey string, v any) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if v != nil {
		data, _ := json.Marshal(v)
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, srv.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idemKey)
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, data
}

// TestIdempotencyKeys: a retried create, exec or remove with the same key
// and request gets the first answer (replayed, marked so) and does nothing
// twice; the same key with another request is a 422; /v1/config says how
// long answers are kept.
func TestIdempotencyKeys(t *testing.T) {
	status, body := callJSON(t, "GET", "/v1/config", nil)
	var cfg struct {
		Capabilities struct {
			Lifetime string `json:"idempotency_key_lifetime"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(body, &cfg); status != 200 || cfg.Capabilities.Lifetime != "PT24H" {
		t.Fatalf("config: %d %s", status, body)
	}

	req := map[string]any{"name": "idem-box", "memory_mib": 256}
	r1, b1 := idemCall(t, "POST", "/v1/boxes", "create-1", req)
	r2, b2 := idemCall(t, "POST", "/v1/boxes", "create-1", req)
	if r1.StatusCode != 201 || r2.StatusCode != 201 || !bytes.Equal(b1, b2) {
		t.Fatalf("create twice with one key: %d %s / %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if r1.Header.Get("Idempotent-Replayed") != "" || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("Idempotent-Replayed: first %q, second %q", r1.Header.Get("Idempotent-Replayed"), r2.Header.Get("Idempotent-Replayed"))
	}
	if r, b := idemCall(t, "POST", "/v1/boxes", "create-1", map[string]any{"name": "idem-other"}); r.StatusCode != 422 || errorCode(t, b) != "invalid_argument" {
		t.Fatalf("one key, another request: %d %s", r.StatusCode, b)
	}
	if status, body := callJSON(t, "POST", "/v1/boxes", req); status != 409 {
		t.Fatalf("the same create without a key creates again (409 for the name): %d %s", status, body)
	}
	if status, _ := callJSON(t, "GET", "/v1/boxes/idem-other", nil); status != 404 {
		t.Fatalf("the refused request ran: %d", status)
	}

	box := streamBox(t)
	e1, eb1 := idemCall(t, "POST", "/v1/boxes/"+box+"/exec", "exec-1", map[string]any{"command": "true"})
	e2, eb2 := idemCall(t, "POST", "/v1/boxes/"+box+"/exec", "exec-1", map[string]any{"command": "true"})
	if e1.StatusCode != 201 || !bytes.Equal(eb1, eb2) || e1.Header.Get("Location") != e2.Header.Get("Location") {
		t.Fatalf("exec twice with one key: %d %s %s / %d %s %s", e1.StatusCode, eb1, e1.Header.Get("Location"), e2.StatusCode, eb2, e2.Header.Get("Location"))
	}

	d1, _ := idemCall(t, "DELETE", "/v1/boxes/idem-box", "rm-1", nil)
	d2, _ := idemCall(t, "DELETE", "/v1/boxes/idem-box", "rm-1", nil)
	if d1.StatusCode != 204 || d2.StatusCode != 204 || d2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("remove twice with one key: %d / %d", d1.StatusCode, d2.StatusCode)
	}
	if d3, b := idemCall(t, "DELETE", "/v1/boxes/idem-box", "rm-2", nil); d3.StatusCode != 404 {
		t.Fatalf("remove with a new key: %d %s", d3.StatusCode, b)
	}
	if r, b := idemCall(t, "POST", "/v1/boxes", "bad key", req); r.StatusCode != 400 {
		t.Fatalf("a key with a space: %d %s", r.StatusCode, b)
	}
}
