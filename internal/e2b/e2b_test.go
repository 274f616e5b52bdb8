package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	rt, err := boxlite.NewRuntime(boxlite.WithHome(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	auth := func(k string) (string, error) {
		switch k {
		case "good":
			return "tests", nil
		case "other":
			return "others", nil
		}
		return "", errors.New("bad key")
	}
	s, err := New(Options{Runtime: rt, Auth: auth, StateDir: t.TempDir(), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestRoutesWithoutABox checks what needs no box: auth, the 404s, 400s
// and 501s of the control plane and of envd's routing.
func TestRoutesWithoutABox(t *testing.T) {
	s := newTestServer(t)
	s.store.put(record{ID: "sbx1", TemplateID: "base", Token: "tok", Key: "tests"})
	for _, c := range []struct {
		method, path, body string
		header             map[string]string
		want               int
	}{
		{"GET", "/e2b/v2/sandboxes", "", nil, 401},
		{"GET", "/e2b/v2/sandboxes", "", map[string]string{"X-API-Key": "good"}, 200},
		{"GET", "/e2b/v2/sandboxes?state=nope", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/sandboxes/sbx1", "", map[string]string{"X-API-Key": "good"}, 200},
		{"GET", "/e2b/sandboxes/nope", "", map[string]string{"X-API-Key": "good"}, 404},
		// Another key's sandbox is not there for this one.
		{"GET", "/e2b/sandboxes/sbx1", "", map[string]string{"X-API-Key": "other"}, 404},
		{"DELETE", "/e2b/sandboxes/sbx1", "", map[string]string{"X-API-Key": "other"}, 404},
		{"POST", "/e2b/sandboxes/sbx1/timeout", `{"timeout":60}`, map[string]string{"X-API-Key": "other"}, 404},
		{"PUT", "/e2b/sandboxes/sbx1/network", `{"allowOut":["1.2.3.4"]}`, map[string]string{"X-API-Key": "other"}, 404},
		{"PUT", "/e2b/sandboxes/sbx1/network", `{"denyOut":["10.0.0.0/8"]}`, map[string]string{"X-API-Key": "good"}, 501},
		{"PUT", "/e2b/sandboxes/sbx1/network", `{"allowOut":["a.b"],"allowInternetAccess":false}`, map[string]string{"X-API-Key": "good"}, 400},
		{"PUT", "/e2b/sandboxes/sbx1/network", `{"bogus":1}`, map[string]string{"X-API-Key": "good"}, 400},
		{"PUT", "/e2b/sandboxes/nope/network", `{}`, map[string]string{"X-API-Key": "good"}, 404},
		{"POST", "/e2b/sandboxes/sbx1/fork", `{"count":0}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/fork", `{"count":21}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/fork", `{"count":1,"x":1}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/nope/fork", `{}`, map[string]string{"X-API-Key": "good"}, 404},
		{"POST", "/e2b/sandboxes/sbx1/snapshots", `{}`, map[string]string{"X-API-Key": "other"}, 404},
		{"POST", "/e2b/sandboxes/nope/snapshots", `{}`, map[string]string{"X-API-Key": "good"}, 404},
		{"POST", "/e2b/sandboxes/sbx1/snapshots", `{"name":"../x"}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/snapshots", `{"name":"base"}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/snapshots", `{"memory":"yes"}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/snapshots", `{"bogus":1}`, map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots", "", map[string]string{"X-API-Key": "good"}, 200},
		{"GET", "/e2b/snapshots?sandboxID=sbx1&name=snap1&limit=5", "", map[string]string{"X-API-Key": "good"}, 200},
		{"GET", "/e2b/snapshots?bogus=1", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots?limit=0", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots?nextToken=zz", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots?name=..%2F..", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots?sandboxID=..%2F..", "", map[string]string{"X-API-Key": "good"}, 400},
		{"GET", "/e2b/snapshots", "", nil, 401},
		{"DELETE", "/e2b/templates/..%2F..%2Fetc", "", map[string]string{"X-API-Key": "good"}, 400},
		{"DELETE", "/e2b/templates/" + strings.Repeat("a", 200), "", map[string]string{"X-API-Key": "good"}, 400},
		{"DELETE", "/e2b/templates/abcdefghij0123456789%3Adefault", "", map[string]string{"X-API-Key": "good"}, 404},
		{"DELETE", "/e2b/templates/base", "", map[string]string{"X-API-Key": "good"}, 501},
		{"DELETE", "/e2b/templates/abcdefghij0123456789", "", nil, 401},
		{"POST", "/e2b/v2/sandboxes", `{"templateID":"abcdefghij0123456789:default"}`, map[string]string{"X-API-Key": "good"}, 404},
		{"POST", "/e2b/v2/sandboxes", `{"templateID":"../../x"}`, map[string]string{"X-API-Key": "good"}, 404},
		{"GET", "/e2b/templates", "", map[string]string{"X-API-Key": "good"}, 501},
		{"GET", "/e2b/sandboxes/metrics", "", map[string]string{"X-API-Key": "good"}, 501},
		{"POST", "/e2b/v2/sandboxes", `{"templateID":"nope"}`, map[string]string{"X-API-Key": "good"}, 404},
		{"POST", "/e2b/v2/sandboxes", `{"templateID":"base","mcp":{"x":1}}`, map[string]string{"X-API-Key": "good"}, 501},
		{"POST", "/e2b/v2/sandboxes", `{"templateID":"base","bogus":1}`, map[string]string{"X-API-Key": "good"}, 400},
		{"POST", "/e2b/sandboxes/sbx1/timeout", `{"timeout":60}`, map[string]string{"X-API-Key": "good"}, 204},
		{"POST", "/process.Process/List", `{}`, map[string]string{"E2b-Sandbox-Id": "sbx1", "E2b-Sandbox-Port": "49983"}, 401},
		{"POST", "/process.Process/List", `{}`, map[string]string{"E2b-Sandbox-Id": "sbx1", "X-Access-Token": "bad"}, 401},
		// A sandbox that is not there is E2B's proxy's 502 "was not found"
		// (code unavailable for a Connect call).
		{"POST", "/process.Process/List", `{}`, map[string]string{"E2b-Sandbox-Id": "nope", "X-Access-Token": "tok"}, 502},
		{"POST", "/process.Process/List", `{}`, map[string]string{"E2b-Sandbox-Id": "nope", "X-Access-Token": "tok", "Content-Type": "application/json"}, 503},
		{"GET", "/health", "", map[string]string{"E2b-Sandbox-Id": "nope"}, 502},
		{"GET", "/health", "", map[string]string{"E2b-Sandbox-Id": "sbx1", "E2b-Sandbox-Port": "8080", "X-Access-Token": "tok"}, 404},
		{"GET", "/health", "", map[string]string{"E2b-Sandbox-Id": "a/b", "X-Access-Token": "tok"}, 400},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if !Wants(r) {
			t.Errorf("%s %s: not E2B's", c.method, c.path)
			continue
		}
		s.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s %s %v: %d, want %d: %s", c.method, c.path, c.header, w.Code, c.want, w.Body.String())
		}
		if w.Code >= 400 && w.Header().Get("Should-Retry") != "false" {
			t.Errorf("%s %s: %d without Should-Retry: false", c.method, c.path, w.Code)
		}
		if w.Code == 502 || w.Code == 503 {
			if !strings.Contains(w.Body.String(), "was not found") {
				t.Errorf("%s %s: %d without E2B's \"was not found\": %s", c.method, c.path, w.Code, w.Body.String())
			}
		}
	}
	// Lists show the caller's sandboxes only.
	for key, want := range map[string]string{"good": `"sbx1"`, "other": "[]"} {
		r := httptest.NewRequest("GET", "/e2b/sandboxes", nil)
		r.Header.Set("X-API-Key", key)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		r = httptest.NewRequest("GET", "/e2b/v2/sandboxes?state=running,paused", nil)
		r.Header.Set("X-API-Key", key)
		w2 := httptest.NewRecorder()
		s.ServeHTTP(w2, r)
		if want == "[]" && (strings.TrimSpace(w.Body.String()) != "[]" || strings.TrimSpace(w2.Body.String()) != "[]") {
			t.Errorf("key %s lists %s and %s; want none", key, w.Body.String(), w2.Body.String())
		}
		_ = want
	}
	if Wants(httptest.NewRequest("GET", "/v1/boxes", nil)) {
		t.Error("BoxLite's /v1 taken as E2B's")
	}
}

func TestParseEntries(t *testing.T) {
	m := "\x1eabc" + sep
	out := m + "regular file\x1f11\x1f81a4\x1f-rw-r--r--\x1froot\x1froot\x1f1700000000\x1f./a\n" +
		m + "directory\x1f4096\x1f41ed\x1fdrwxr-xr-x\x1froot\x1froot\x1f1700000000\x1f./odd\nname\x1fwith\n"
	es := parseEntries(out, m)
	if len(es) != 2 || es[0].path != "./a" || es[0].size != 11 || es[0].mode != 0o644 || es[1].path != "./odd\nname\x1fwith" || es[1].kind != "directory" {
		t.Fatalf("%+v", es)
	}
}

func TestResolve(t *testing.T) {
	for in, want := range map[string]string{"/a/../b": "/b", "x": "/root/x", "../../etc": "/etc", "~/y": "/root/y"} {
		if got, err := resolve(in, ""); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := resolve("x", "user"); got != "/home/user/x" {
		t.Errorf("user's home: %q", got)
	}
	for _, bad := range []string{"", "a\x00b", strings.Repeat("a", 5000)} {
		if _, err := resolve(bad, ""); err == nil {
			t.Errorf("resolve(%q) passed", truncate(bad))
		}
	}
}

func TestSignature(t *testing.T) {
	sum := sha256.Sum256([]byte("/tmp/a:read::tok"))
	sig := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	r := httptest.NewRequest("GET", "/files?path=/tmp/a&signature="+sig, nil)
	if !tokenOK(r, "tok") {
		t.Error("a good signature refused")
	}
	r = httptest.NewRequest("GET", "/files?path=/tmp/b&signature="+sig, nil)
	if tokenOK(r, "tok") {
		t.Error("a signature for another path taken")
	}
	r = httptest.NewRequest("GET", "/files?path=/tmp/a", nil)
	r.Header.Set("X-Access-Token", "tok")
	if !tokenOK(r, "tok") {
		t.Error("the token refused")
	}
}

func TestTrafficToken(t *testing.T) {
	r := httptest.NewRequest("GET", "/contexts", nil)
	if trafficOK(r, "") || trafficOK(r, "tr") {
		t.Error("no token taken")
	}
	r.Header.Set("E2B-Traffic-Access-Token", "tr")
	if !trafficOK(r, "tr") || trafficOK(r, "other") || trafficOK(r, "") {
		t.Error("the traffic token misjudged")
	}
	if tokenOK(r, "tr") {
		t.Error("the traffic token opened envd")
	}
	m := sandboxJSON(record{ID: "x", Token: "ea", Traffic: "tr"})
	if m["trafficAccessToken"] != "tr" || m["envdAccessToken"] != "ea" {
		t.Errorf("%v", m)
	}
	if _, ok := sandboxJSON(record{ID: "x", Token: "ea"})["trafficAccessToken"]; ok {
		t.Error("an empty traffic token was given out")
	}
}

func TestUserOf(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:")))
	if u, err := userOf(h); err != nil || u != "user" {
		t.Errorf("%q %v", u, err)
	}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("a b:")))
	if _, err := userOf(h); err == nil {
		t.Error("a bad user passed")
	}
}

// TestSnapshotRefs checks how a snapshot is named and found: by id or name,
// with or without namespace and tag, and only by its own key.
func TestSnapshotRefs(t *testing.T) {
	s := newTestServer(t)
	anon := snapshot{ID: newSnapshotID(), Key: "tests", Holder: "h1", CreatedAt: time.Unix(1, 0)}
	named := snapshot{ID: newSnapshotID(), Name: "my-snap", Key: "tests", Holder: "h2", CreatedAt: time.Unix(2, 0)}
	s.snaps.put(anon)
	s.snaps.put(named)
	if !snapshotIDPattern.MatchString(anon.ID) || anon.ref() != anon.ID+":default" || named.ref() != "tests/my-snap:default" {
		t.Fatalf("refs %q %q", anon.ref(), named.ref())
	}
	for ref, want := range map[string]string{anon.ID: anon.ID, anon.ID + ":default": anon.ID, "my-snap": named.ID,
		"tests/my-snap": named.ID, "tests/my-snap:default": named.ID, "my-snap:default": named.ID,
		"others/my-snap": "", "my-snap:v2": "", "tests/" + anon.ID: "", "nope": ""} {
		sn, ok := s.snaps.resolve("tests", ref)
		if got := map[bool]string{true: sn.ID, false: ""}[ok]; got != want {
			t.Errorf("resolve(%q) = %q, want %q", ref, got, want)
		}
		if _, ok := s.snaps.resolve("others", ref); ok {
			t.Errorf("another key resolved %q", ref)
		}
	}
	if l := s.snaps.owned("tests"); len(l) != 2 || l[0].ID != named.ID {
		t.Errorf("owned: %+v", l)
	}
	// A snapshot taken again under a name keeps the name's id.
	again := snapshot{ID: newSnapshotID(), Name: "my-snap", Key: "tests", Holder: "h3", CreatedAt: time.Unix(3, 0)}
	got, old, replaced := s.snaps.putNamed(again)
	if !replaced || got.ID != named.ID || old.Holder != "h2" || len(s.snaps.owned("tests")) != 2 {
		t.Errorf("putNamed: %+v %+v %v", got, old, replaced)
	}
	// Lists: the caller's only, in pages.
	list := func(key, q string) (string, string) {
		r := httptest.NewRequest("GET", "/e2b/snapshots"+q, nil)
		r.Header.Set("X-API-Key", key)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return strings.TrimSpace(w.Body.String()), w.Header().Get("X-Next-Token")
	}
	if body, _ := list("other", ""); body != "[]" {
		t.Errorf("another key lists %s", body)
	}
	body, next := list("good", "?limit=1")
	if !strings.Contains(body, `"tests/my-snap:default"`) || next == "" {
		t.Errorf("page 1: %s, next %q", body, next)
	}
	if body, next = list("good", "?limit=1&nextToken="+next); !strings.Contains(body, anon.ID+":default") || next != "" {
		t.Errorf("page 2: %s, next %q", body, next)
	}
	if body, _ = list("good", "?name=tests/my-snap"); strings.Contains(body, anon.ID) || !strings.Contains(body, "my-snap") {
		t.Errorf("by name: %s", body)
	}
	// Another key cannot delete one.
	r := httptest.NewRequest("DELETE", "/e2b/templates/"+anon.ID, nil)
	r.Header.Set("X-API-Key", "other")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Errorf("another key's delete: %d %s", w.Code, w.Body.String())
	}
}
