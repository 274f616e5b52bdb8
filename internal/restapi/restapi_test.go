package restapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
)

func TestEveryKindHasAnHTTPAnswer(t *testing.T) {
	for _, k := range errdefs.Kinds {
		a, ok := kindErrors[k.Kind]
		if !ok {
			t.Errorf("error kind %s has no HTTP answer in kindErrors", k.Kind)
			continue
		}
		if a.Status < 400 || a.Code == "" || !strings.HasSuffix(a.Type, "Error") {
			t.Errorf("kind %s answers %+v", k.Kind, a)
		}
	}
}

// TestOpenAPIDescribesEveryRoute: the document has each route once, with
// its success status, and every schema it names exists.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	data, err := MarshalOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		k := rt.method + " " + rt.path
		if seen[k] {
			t.Errorf("route %s twice", k)
		}
		seen[k] = true
		op, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("%s is not in the document", k)
			continue
		}
		if op["operationId"] != rt.id {
			t.Errorf("%s: operationId %v", k, op["operationId"])
		}
		if _, ok := op["responses"].(map[string]any)[http.StatusText(rt.status)]; ok {
			t.Errorf("%s: responses keyed by text", k)
		}
	}
	for _, ref := range regexpRefs(string(data)) {
		if _, ok := doc.Components.Schemas[ref]; !ok {
			t.Errorf("the document refers to schema %s, which it does not define", ref)
		}
	}
	for _, name := range []string{"CreateBoxRequest", "Box", "ExecRequest", "ErrorResponse", "ExecutionInfo"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s missing", name)
		}
	}
}

func regexpRefs(s string) []string {
	var out []string
	for _, part := range strings.Split(s, `"#/components/schemas/`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

func TestArchiveNamesAndIDs(t *testing.T) {
	for _, ok := range []string{"a", "box-1", "A.b_c", strings.Repeat("x", 128)} {
		if !idPattern.MatchString(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "-a", ".a", "a b", strings.Repeat("x", 129), "a\x00"} {
		if idPattern.MatchString(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestOpenAPIShowsProcessGroup: boxlite's extension of SignalRequest is in
// the document, described as one.
func TestOpenAPIShowsProcessGroup(t *testing.T) {
	data, err := MarshalOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	p, ok := doc.Components.Schemas["SignalRequest"].Properties["process_group"]
	if !ok || p.Type != "boolean" || !strings.Contains(p.Description, "boxlite extension") {
		t.Errorf("SignalRequest.process_group in the document: %+v (present %v)", p, ok)
	}
}
