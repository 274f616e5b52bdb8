package e2b

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"
)

var httpc = &http.Client{Timeout: 2 * time.Minute}

type req struct {
	method, path string
	header       map[string]string
	body         []byte
}

func do(t *testing.T, r req) (int, []byte) {
	t.Helper()
	hr, err := http.NewRequest(r.method, url+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := httpc.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body
}

// sandbox creates a sandbox with raw requests: its id, access token and
// traffic access token.
func sandbox(t *testing.T) (string, string, string) {
	st, body := do(t, req{"POST", "/e2b/sandboxes", map[string]string{"X-API-Key": key, "Content-Type": "application/json"}, []byte(`{"templateID":"base","timeout":600}`)})
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
		Traffic         string `json:"trafficAccessToken"`
	}
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		do(t, req{"DELETE", "/e2b/sandboxes/" + sb.SandboxID, map[string]string{"X-API-Key": key}, nil})
	})
	if sb.Traffic == "" || sb.Traffic == sb.EnvdAccessToken {
		t.Fatalf("create gave no traffic token of its own: %s", body)
	}
	return sb.SandboxID, sb.EnvdAccessToken, sb.Traffic
}

// envelope is one Connect streaming frame.
func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// TestHostile sends malformed, oversized, unauthenticated and random
// requests to the control plane and to a sandbox's envd: each gets a 4xx
// (or a documented 501), none a 5xx, and the sandbox works after.
func TestHostile(t *testing.T) {
	id, token, traffic := sandbox(t)
	api := map[string]string{"X-API-Key": key, "Content-Type": "application/json"}
	envd := func(extra map[string]string) map[string]string {
		h := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983", "X-Access-Token": token, "Content-Type": "application/json"}
		for k, v := range extra {
			if v == "" {
				delete(h, k)
			} else {
				h[k] = v
			}
		}
		return h
	}
	big := bytes.Repeat([]byte("a"), 5<<20)
	cases := []struct {
		name string
		r    req
		want int
	}{
		{"no key", req{"GET", "/e2b/v2/sandboxes", nil, nil}, 401},
		{"bad key", req{"GET", "/e2b/v2/sandboxes", map[string]string{"X-API-Key": "bxl_nope"}, nil}, 401},
		{"unknown route", req{"GET", "/e2b/nope", api, nil}, 404},
		{"bad json", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":`)}, 400},
		{"unknown field", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":"base","nope":1}`)}, 400},
		{"two values", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":"base"} {}`)}, 400},
		{"big body", req{"POST", "/e2b/v2/sandboxes", api, big}, 413},
		{"unknown template", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":"nope"}`)}, 404},
		{"negative timeout", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":"base","timeout":-1}`)}, 400},
		{"huge timeout", req{"POST", "/e2b/sandboxes/" + id + "/timeout", api, []byte(`{"timeout":999999999}`)}, 400},
		{"bad list state", req{"GET", "/e2b/v2/sandboxes?state=zombie", api, nil}, 400},
		{"bad list token", req{"GET", "/e2b/v2/sandboxes?nextToken=zz", api, nil}, 400},
		{"bad id", req{"GET", "/e2b/sandboxes/..%2f..", api, nil}, 400},
		{"unknown sandbox", req{"GET", "/e2b/sandboxes/nope", api, nil}, 404},
		{"snapshot bad name", req{"POST", "/e2b/sandboxes/" + id + "/snapshots", api, []byte(`{"name":"../x"}`)}, 400},
		{"snapshot unknown field", req{"POST", "/e2b/sandboxes/" + id + "/snapshots", api, []byte(`{"nope":1}`)}, 400},
		{"snapshot big body", req{"POST", "/e2b/sandboxes/" + id + "/snapshots", api, big}, 413},
		{"snapshot unknown sandbox", req{"POST", "/e2b/sandboxes/nope/snapshots", api, []byte(`{}`)}, 404},
		{"snapshot bad sandbox id", req{"POST", "/e2b/sandboxes/..%2f../snapshots", api, []byte(`{}`)}, 400},
		{"snapshots bad list", req{"GET", "/e2b/snapshots?limit=-1", api, nil}, 400},
		{"snapshots bad name", req{"GET", "/e2b/snapshots?name=%2e%2e%2fx", api, nil}, 400},
		{"delete bad snapshot id", req{"DELETE", "/e2b/templates/..%2f..%2fetc", api, nil}, 400},
		{"delete unknown snapshot", req{"DELETE", "/e2b/templates/abcdefghij0123456789%3adefault", api, nil}, 404},
		{"create from unknown snapshot", req{"POST", "/e2b/v2/sandboxes", api, []byte(`{"templateID":"abcdefghij0123456789:default"}`)}, 404},
		{"fork count 0", req{"POST", "/e2b/sandboxes/" + id + "/fork", api, []byte(`{"count":0}`)}, 400},
		{"fork count 1000", req{"POST", "/e2b/sandboxes/" + id + "/fork", api, []byte(`{"count":1000}`)}, 400},
		{"fork unknown", req{"POST", "/e2b/sandboxes/nope/fork", api, []byte(`{}`)}, 404},
		{"envd without token", req{"POST", "/process.Process/List", envd(map[string]string{"X-Access-Token": ""}), []byte(`{}`)}, 401},
		{"envd bad token", req{"POST", "/process.Process/List", envd(map[string]string{"X-Access-Token": "ea_nope"}), []byte(`{}`)}, 401},
		{"envd with the traffic token", req{"POST", "/process.Process/List", envd(map[string]string{"X-Access-Token": "", "E2B-Traffic-Access-Token": traffic}), []byte(`{}`)}, 401},
		{"interpreter without token", req{"GET", "/contexts", envd(map[string]string{"E2b-Sandbox-Port": "49999", "X-Access-Token": ""}), nil}, 401},
		{"interpreter bad traffic token", req{"GET", "/contexts", envd(map[string]string{"E2b-Sandbox-Port": "49999", "X-Access-Token": "", "E2B-Traffic-Access-Token": "ea_nope"}), nil}, 401},
		{"interpreter traffic token", req{"GET", "/health", envd(map[string]string{"E2b-Sandbox-Port": "49999", "X-Access-Token": "", "E2B-Traffic-Access-Token": traffic}), nil}, 200},
		// E2B's proxy's answer for a sandbox that is not running, which
		// E2B's SDKs read as SandboxNotRunningException: code unavailable
		// (503) for a Connect call, 502 otherwise.
		{"envd unknown sandbox", req{"POST", "/process.Process/List", envd(map[string]string{"E2b-Sandbox-Id": "nope"}), []byte(`{}`)}, 503},
		{"health unknown sandbox", req{"GET", "/health", envd(map[string]string{"E2b-Sandbox-Id": "nope"}), nil}, 502},
		{"envd bad sandbox id", req{"POST", "/process.Process/List", envd(map[string]string{"E2b-Sandbox-Id": "../x"}), []byte(`{}`)}, 400},
		{"envd unknown port", req{"GET", "/health", envd(map[string]string{"E2b-Sandbox-Port": "22"}), nil}, 404},
		{"unknown service", req{"POST", "/nope.Nope/Call", envd(nil), []byte(`{}`)}, 404},
		{"malformed message", req{"POST", "/process.Process/List", envd(map[string]string{"Content-Type": "application/proto"}), []byte{0xff, 0xff, 0xff}}, 400},
		{"malformed json", req{"POST", "/filesystem.Filesystem/Stat", envd(nil), []byte(`{"path":`)}, 400},
		{"oversized message", req{"POST", "/filesystem.Filesystem/Stat", envd(nil), append(append([]byte(`{"path":"`), big...), '"', '}')}, 0},
		{"path with NUL", req{"POST", "/filesystem.Filesystem/Stat", envd(nil), []byte(`{"path":"/tmp/a\u0000b"}`)}, 400},
		{"missing path", req{"POST", "/filesystem.Filesystem/Stat", envd(nil), []byte(`{"path":"/nope/nope"}`)}, 404},
		{"remove /", req{"POST", "/filesystem.Filesystem/Remove", envd(nil), []byte(`{"path":"/"}`)}, 400},
		{"deep list", req{"POST", "/filesystem.Filesystem/ListDir", envd(nil), []byte(`{"path":"/","depth":100000}`)}, 400},
		{"empty command", req{"POST", "/process.Process/SendSignal", envd(nil), []byte(`{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}`)}, 404},
		{"bad stream envelope", req{"POST", "/process.Process/Start", envd(map[string]string{"Content-Type": "application/connect+json"}), []byte{0, 0, 0}}, 0},
		{"oversized frame", req{"POST", "/process.Process/Start", envd(map[string]string{"Content-Type": "application/connect+json"}), envelope(0, big)}, 0},
		{"download missing", req{"GET", "/files?path=/nope/nope", envd(nil), nil}, 404},
		{"download a directory", req{"GET", "/files?path=/etc", envd(nil), nil}, 400},
		{"upload unknown encoding", req{"POST", "/files?path=/tmp/x", envd(map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "br"}), []byte("x")}, 415},
		{"upload bad user", req{"POST", "/files?path=/tmp/x&username=a%20b", envd(map[string]string{"Content-Type": "application/octet-stream"}), []byte("x")}, 400},
	}
	for _, c := range cases {
		st, body := do(t, c.r)
		if st >= 500 && st != c.want {
			t.Errorf("%s: %d %s", c.name, st, truncate(body))
		} else if c.want != 0 && st != c.want {
			t.Errorf("%s: %d, want %d: %s", c.name, st, c.want, truncate(body))
		}
	}
	// Random requests: methods, paths, headers and bodies, none a 5xx.
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	paths := []string{"/e2b/sandboxes", "/e2b/v2/sandboxes", "/e2b/sandboxes/" + id, "/e2b/sandboxes/" + id + "/timeout",
		"/e2b/sandboxes/" + id + "/connect", "/e2b/sandboxes/" + id + "/metrics", "/e2b/sandboxes/" + id + "/logs",
		"/e2b/snapshots", "/e2b/templates/abcdefghij0123456789", "/e2b/templates/a%2fb%3ac",
		"/process.Process/List", "/process.Process/Start", "/process.Process/SendInput", "/process.Process/Connect", "/process.Process/Update",
		"/filesystem.Filesystem/Stat", "/filesystem.Filesystem/ListDir", "/filesystem.Filesystem/GetWatcherEvents", "/files", "/envs", "/health", "/metrics"}
	ctypes := []string{"application/json", "application/proto", "application/connect+json", "application/connect+proto", "multipart/form-data; boundary=x", "text/plain", ""}
	for i := 0; i < 300; i++ {
		body := make([]byte, rng.Intn(256))
		rng.Read(body)
		if rng.Intn(2) == 0 {
			body = []byte(fmt.Sprintf(`{"path":"/tmp/%d","process":{"pid":%d},"timeout":%d,"depth":%d}`, rng.Intn(9), rng.Intn(5), rng.Intn(5)-1, rng.Intn(3)))
		}
		r := req{[]string{"GET", "POST", "PUT", "DELETE"}[rng.Intn(4)], paths[rng.Intn(len(paths))], envd(map[string]string{"Content-Type": ctypes[rng.Intn(len(ctypes))]}), body}
		if strings.HasPrefix(r.path, "/e2b/") {
			r.header = map[string]string{"X-API-Key": key, "Content-Type": ctypes[rng.Intn(len(ctypes))]}
			if strings.HasSuffix(r.path, id) && r.method == "DELETE" {
				r.method = "GET" // the sandbox is needed after
			}
		}
		if rng.Intn(10) == 0 {
			r.path += "?path=%00&depth=-1&username=" + fmt.Sprint(rng.Intn(3))
		}
		if st, b := do(t, r); st >= 500 && st != 501 {
			t.Errorf("random %s %s (%s): %d %s", r.method, r.path, r.header["Content-Type"], st, truncate(b))
		}
	}
	// The sandbox still works.
	st, body := do(t, req{"POST", "/filesystem.Filesystem/Stat", envd(nil), []byte(`{"path":"/etc/hostname"}`)})
	if st != 200 || !strings.Contains(string(body), `"name":"hostname"`) {
		t.Fatalf("stat after the hostile run: %d %s", st, body)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
