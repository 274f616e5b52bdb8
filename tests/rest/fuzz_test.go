package rest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// TestFuzzFromSchema sends every operation of the served OpenAPI document
// requests made from its schema: valid-shaped bodies with random values,
// wrong types, unknown fields, broken JSON, hostile archives, odd path and
// query values. No answer may be a 5xx other than the 501 an operation
// documents, and the server must be alive and answering at the end.
func TestFuzzFromSchema(t *testing.T) {
	status, body := call(t, "GET", "/v1/openapi.json", "", nil, "")
	if status != 200 {
		t.Fatalf("openapi.json: %d", status)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	// Half the requests name a real box (configured at first; the fuzz's
	// execs and uploads start it), so they get past the lookup.
	if status, body := callJSON(t, "POST", "/v1/boxes", map[string]any{"name": "fuzz-target", "memory_mib": 256}); status != 201 {
		t.Fatalf("create the target: %d %s", status, body)
	}
	f := &fuzzer{rnd: rand.New(rand.NewSource(21)), schemas: doc["components"].(map[string]any)["schemas"].(map[string]any)}
	paths := doc["paths"].(map[string]any)
	var keys []string
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	const perOp = 40
	sent, bad := 0, 0
	for _, p := range keys {
		for method, raw := range paths[p].(map[string]any) {
			op := raw.(map[string]any)
			resps := op["responses"].(map[string]any)
			_, notServed := resps["501"]
			for i := 0; i < perOp; i++ {
				req := f.request(strings.ToUpper(method), p, op)
				resp, err := httpc.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v (the server died?)", req.Method, req.URL, err)
				}
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				sent++
				if resp.StatusCode >= 500 && !(resp.StatusCode == 501 && notServed) {
					bad++
					if bad <= 10 {
						t.Errorf("%s %s: %d", req.Method, req.URL, resp.StatusCode)
					}
				}
			}
		}
	}
	t.Logf("%d requests, %d answered 5xx", sent, bad)
	if status, _ := call(t, "GET", "/healthz", "", nil, ""); status != 200 {
		t.Fatalf("after the fuzz, /healthz: %d", status)
	}
	if status, _ := callJSON(t, "GET", "/v1/boxes", nil); status != 200 {
		t.Fatalf("after the fuzz, GET /v1/boxes: %d", status)
	}
}

type fuzzer struct {
	rnd     *rand.Rand
	schemas map[string]any
}

var oddStrings = []string{"", " ", "..", "../../etc/passwd", "/", "%00", "a\x00b", "\u202e", "日本", "-", "a.b", "A_b-9",
	"sha256:" + strings.Repeat("a", 64), "alpine:latest", strings.Repeat("x", 300), "true", "0", "-1", "null", "{}", "<script>"}

func (f *fuzzer) str() string {
	if f.rnd.Intn(3) == 0 {
		return fmt.Sprintf("fz%d", f.rnd.Intn(1e6))
	}
	return oddStrings[f.rnd.Intn(len(oddStrings))]
}

func (f *fuzzer) request(method, path string, op map[string]any) *http.Request {
	u := "/v1" + path
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") {
			v := f.str()
			if seg == "{box_id}" && f.rnd.Intn(2) == 0 && !(method == "DELETE" && path == "/boxes/{box_id}") {
				v = "fuzz-target"
			}
			u = strings.Replace(u, seg, url.PathEscape(v), 1)
		}
	}
	q := url.Values{}
	hdr := http.Header{}
	if ps, ok := op["parameters"].([]any); ok {
		for _, p := range ps {
			pm := p.(map[string]any)
			switch {
			case pm["in"] == "query" && f.rnd.Intn(2) == 0:
				q.Set(pm["name"].(string), f.scalarString())
			case pm["in"] == "header" && f.rnd.Intn(2) == 0:
				if v := f.str(); !strings.ContainsAny(v, "\x00\r\n") { // what a client can send
					hdr.Set(pm["name"].(string), v)
				}
			}
		}
	}
	if f.rnd.Intn(8) == 0 {
		q.Set(f.str(), f.str())
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	ctype := ""
	if rb, ok := op["requestBody"].(map[string]any); ok {
		content := rb["content"].(map[string]any)
		for ct, m := range content {
			ctype = ct
			if ct == "application/json" {
				body = bytes.NewReader(f.jsonBody(m.(map[string]any)["schema"].(map[string]any)))
			} else {
				body = bytes.NewReader(f.rawBody())
			}
		}
	} else if f.rnd.Intn(4) == 0 {
		body, ctype = strings.NewReader(`{"unexpected":true}`), "application/json"
	}
	req, _ := http.NewRequest(method, srv.url+u, body)
	req.Header = hdr
	req.Header.Set("Authorization", "Bearer "+key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req
}

func (f *fuzzer) scalarString() string {
	switch f.rnd.Intn(4) {
	case 0:
		return fmt.Sprint(f.rnd.Intn(2000) - 500)
	case 1:
		return []string{"true", "false", "yes", ""}[f.rnd.Intn(4)]
	}
	return f.str()
}

func (f *fuzzer) jsonBody(schema map[string]any) []byte {
	switch f.rnd.Intn(10) {
	case 0:
		return []byte(`{"a":`) // broken
	case 1:
		return []byte(`[1,2,3]`)
	case 2:
		return []byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000))
	case 3:
		return []byte(`{"name":"x"} {"name":"y"}`)
	}
	v := f.value(schema, 0)
	if m, ok := v.(map[string]any); ok && f.rnd.Intn(4) == 0 {
		m[f.str()] = f.str() // an unknown field
	}
	data, _ := json.Marshal(v)
	return data
}

// value is a random value of schema: mostly of its type, sometimes not.
func (f *fuzzer) value(schema map[string]any, depth int) any {
	if ref, ok := schema["$ref"].(string); ok {
		schema = f.schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	if alts, ok := schema["anyOf"].([]any); ok {
		if f.rnd.Intn(3) == 0 {
			return nil
		}
		return f.value(alts[0].(map[string]any), depth)
	}
	if alts, ok := schema["allOf"].([]any); ok {
		return f.value(alts[0].(map[string]any), depth)
	}
	if f.rnd.Intn(12) == 0 || depth > 4 {
		return []any{nil, 1e308, -7, "s", true, []any{}, map[string]any{}}[f.rnd.Intn(7)]
	}
	if enum, ok := schema["enum"].([]any); ok && f.rnd.Intn(4) != 0 {
		return enum[f.rnd.Intn(len(enum))]
	}
	switch schema["type"] {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for name, ps := range props {
			if f.rnd.Intn(2) == 0 {
				out[name] = f.value(ps.(map[string]any), depth+1)
			}
		}
		if ap, ok := schema["additionalProperties"].(map[string]any); ok {
			for i := f.rnd.Intn(3); i > 0; i-- {
				out[f.str()] = f.value(ap, depth+1)
			}
		}
		return out
	case "array":
		items, _ := schema["items"].(map[string]any)
		var out []any
		for i := f.rnd.Intn(4); i > 0; i-- {
			out = append(out, f.value(items, depth+1))
		}
		return out
	case "integer":
		return []int64{0, 1, -1, 128, 512, 1 << 31, 1 << 62, int64(f.rnd.Intn(100000))}[f.rnd.Intn(8)]
	case "number":
		return []float64{0, 0.0001, -1, 1e9, 1e300, f.rnd.Float64() * 100}[f.rnd.Intn(6)]
	case "boolean":
		return f.rnd.Intn(2) == 0
	}
	return f.str()
}

// rawBody is an upload: random bytes, or a tar archive with hostile names.
func (f *fuzzer) rawBody() []byte {
	if f.rnd.Intn(2) == 0 {
		b := make([]byte, f.rnd.Intn(4096))
		f.rnd.Read(b)
		return b
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{f.str(), "../escape", "/abs", "ok.txt"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
		tw.Write([]byte("abc"))
	}
	tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3})
	tw.Close()
	return buf.Bytes()
}
