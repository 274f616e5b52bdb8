package rest

import (
	"encoding/json"
	"testing"
)

// TestStopGraceThenEnd: BoxLite's timeout_seconds is a stop's graceful
// part; past it the box is ended and the stop answers 200 with the box
// stopped (not a 504 because the grace ran out).
func TestStopGraceThenEnd(t *testing.T) {
	status, body := callJSON(t, "POST", "/v1/boxes", map[string]any{"name": "stop-grace", "memory_mib": 256})
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	defer callJSON(t, "DELETE", "/v1/boxes/stop-grace?force=true", nil)
	if status, body := callJSON(t, "POST", "/v1/boxes/stop-grace/start", nil); status != 200 {
		t.Fatalf("start: %d %s", status, body)
	}
	status, body = callJSON(t, "POST", "/v1/boxes/stop-grace/stop", map[string]any{"timeout_seconds": 0.001})
	var b struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &b); status != 200 || b.Status != "stopped" {
		t.Fatalf("stop with a 1 ms grace: %d %s", status, body)
	}
}
