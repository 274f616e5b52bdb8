// Package k8sdocs checks the Kubernetes manifests of docs/kubernetes.md
// against the published schemas (testdata/README.md says which): the
// agent-sandbox CRDs' openAPIV3Schema and node.k8s.io/v1's OpenAPI v3
// for the RuntimeClass, and that they agree with each other and with the
// containerd configuration the page gives.
package k8sdocs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
)

const docPath = "../../docs/kubernetes.md"

// kindSchema is a served version of a kind and its schema.
type kindSchema struct {
	schema     map[string]any
	refs       map[string]any
	deprecated bool
	namespaced bool
}

// gvk is "group/version Kind" (apiVersion and kind as a manifest has them).
func gvk(apiVersion, kind string) string { return apiVersion + " " + kind }

// loadSchemas reads the vendored CRDs and OpenAPI after checking their
// checksums against testdata/README.md.
func loadSchemas(t *testing.T) map[string]kindSchema {
	t.Helper()
	readme, err := os.ReadFile("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([0-9a-f]{64})  (\S+)$`).FindAllStringSubmatch(string(readme), -1) {
		sums[m[2]] = m[1]
	}
	out := map[string]kindSchema{}
	files, _ := filepath.Glob("testdata/*/*")
	n := 0
	for _, f := range files {
		rel := strings.TrimPrefix(f, "testdata/")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if want, ok := sums[rel]; !ok || want != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: sha256 %x, testdata/README.md says %q: vendored files are verbatim", rel, sum, want)
		}
		n++
		switch {
		case strings.HasSuffix(f, ".yaml"):
			var crd struct {
				Kind string `yaml:"kind"`
				Spec struct {
					Group string `yaml:"group"`
					Scope string `yaml:"scope"`
					Names struct {
						Kind string `yaml:"kind"`
					} `yaml:"names"`
					Versions []struct {
						Name       string `yaml:"name"`
						Served     bool   `yaml:"served"`
						Deprecated bool   `yaml:"deprecated"`
						Schema     struct {
							OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
						} `yaml:"schema"`
					} `yaml:"versions"`
				} `yaml:"spec"`
			}
			if err := yaml.Unmarshal(data, &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
				t.Fatalf("%s: not a CRD (%v)", f, err)
			}
			for _, v := range crd.Spec.Versions {
				if v.Served {
					out[gvk(crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Kind)] = kindSchema{
						schema: v.Schema.OpenAPIV3Schema, deprecated: v.Deprecated,
						namespaced: crd.Spec.Scope == "Namespaced",
					}
				}
			}
		case strings.HasSuffix(f, ".json"):
			var spec struct {
				Components struct {
					Schemas map[string]map[string]any `json:"schemas"`
				} `json:"components"`
			}
			if err := json.Unmarshal(data, &spec); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			refs := map[string]any{}
			for name, s := range spec.Components.Schemas {
				refs["#/components/schemas/"+name] = s
			}
			for _, s := range spec.Components.Schemas {
				for _, g := range asSlice(s["x-kubernetes-group-version-kind"]) {
					g := g.(map[string]any)
					av := g["version"].(string)
					if grp := g["group"].(string); grp != "" {
						av = grp + "/" + av
					}
					// node.k8s.io's kinds are cluster-scoped.
					out[gvk(av, g["kind"].(string))] = kindSchema{schema: s, refs: refs}
				}
			}
		}
	}
	if n != len(sums) {
		t.Fatalf("testdata has %d schema files, testdata/README.md lists %d", n, len(sums))
	}
	return out
}

// manifest is one YAML document of the page.
type manifest struct {
	line int // of its code block in the page
	obj  map[string]any
}

// docManifests extracts every YAML document of the page's ```yaml blocks
// and the ```toml blocks' text.
func docManifests(t *testing.T) (ms []manifest, tomls []string) {
	t.Helper()
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		start := i + 1
		j := start
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: code block not closed", docPath, i+1)
		}
		body := strings.Join(lines[start:j], "\n")
		switch lang {
		case "yaml":
			dec := yaml.NewDecoder(bytes.NewReader([]byte(body)))
			for {
				var obj map[string]any
				err := dec.Decode(&obj)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s:%d: %v", docPath, start, err)
				}
				ms = append(ms, manifest{line: start, obj: obj})
			}
		case "toml":
			tomls = append(tomls, body)
		}
		i = j
	}
	return ms, tomls
}

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	quantity     = regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)
)

// validateManifest validates obj as the API server would on create.
func validateManifest(schemas map[string]kindSchema, obj map[string]any) []string {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	ks, ok := schemas[gvk(av, kind)]
	if !ok {
		return []string{fmt.Sprintf("apiVersion %q kind %q: no published schema serves it", av, kind)}
	}
	v := &validator{refs: ks.refs}
	if ks.deprecated {
		v.errf(kind, "%s is a deprecated version", av)
	}
	// ObjectMeta is validated by the API server itself, not the schema
	// (a CRD's schema has only "metadata: {type: object}").
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if len(name) > 253 || !dnsSubdomain.MatchString(name) {
		v.errf(kind+".metadata.name", "%q is not a DNS subdomain", name)
	}
	for k := range meta {
		switch k {
		case "name", "namespace", "labels", "annotations":
		default:
			v.errf(kind+".metadata."+k, "not expected in a manifest")
		}
	}
	// The built-in type's own validation beyond its schema.
	if kind == "RuntimeClass" {
		handler, _ := obj["handler"].(string)
		if len(handler) > 63 || !dnsLabel.MatchString(handler) {
			v.errf(kind+".handler", "%q is not a DNS label (RFC 1123)", handler)
		}
	}
	body := map[string]any{}
	for k, x := range obj {
		if k != "metadata" {
			body[k] = x
		}
	}
	v.validate(kind, body, ks.schema)
	return v.errs
}

func TestDocManifestsValidate(t *testing.T) {
	schemas := loadSchemas(t)
	ms, tomls := docManifests(t)
	byKind := map[string][]map[string]any{}
	for _, m := range ms {
		kind, _ := m.obj["kind"].(string)
		byKind[kind] = append(byKind[kind], m.obj)
		for _, e := range validateManifest(schemas, m.obj) {
			t.Errorf("%s:%d: %s", docPath, m.line, e)
		}
	}
	for _, k := range []string{"RuntimeClass", "Sandbox", "SandboxTemplate", "SandboxWarmPool", "SandboxClaim"} {
		if len(byKind[k]) == 0 {
			t.Errorf("%s has no %s manifest", docPath, k)
		}
	}
	if t.Failed() {
		return
	}

	// The manifests agree with each other and with containerd's config.
	rc := byKind["RuntimeClass"][0]
	rcName := rc["metadata"].(map[string]any)["name"].(string)
	handler, _ := rc["handler"].(string)
	if oh, ok := rc["overhead"].(map[string]any); ok {
		for r, q := range oh["podFixed"].(map[string]any) {
			if !quantity.MatchString(fmt.Sprint(q)) {
				t.Errorf("RuntimeClass overhead %s: %v is not a quantity", r, q)
			}
		}
	}
	var runtimes []string
	for _, body := range tomls {
		var cfg struct {
			Plugins map[string]struct {
				Containerd struct {
					Runtimes map[string]struct {
						RuntimeType string `toml:"runtime_type"`
					} `toml:"runtimes"`
				} `toml:"containerd"`
			} `toml:"plugins"`
		}
		if _, err := toml.Decode(body, &cfg); err != nil {
			t.Fatalf("the page's containerd config: %v", err)
		}
		for _, p := range cfg.Plugins {
			for name, r := range p.Containerd.Runtimes {
				if r.RuntimeType == "io.containerd.boxlite.v2" {
					runtimes = append(runtimes, name)
				}
			}
		}
	}
	if len(runtimes) != 1 || runtimes[0] != handler {
		t.Errorf("containerd config's boxlite runtimes %v, RuntimeClass handler %q", runtimes, handler)
	}
	names := func(kind string) map[string]bool {
		out := map[string]bool{}
		for _, o := range byKind[kind] {
			out[o["metadata"].(map[string]any)["name"].(string)] = true
		}
		return out
	}
	for _, kind := range []string{"Sandbox", "SandboxTemplate"} {
		for _, o := range byKind[kind] {
			pod := o["spec"].(map[string]any)["podTemplate"].(map[string]any)["spec"].(map[string]any)
			if pod["runtimeClassName"] != rcName {
				t.Errorf("%s %v: runtimeClassName %v, the RuntimeClass is %q", kind, o["metadata"], pod["runtimeClassName"], rcName)
			}
		}
	}
	for _, o := range byKind["SandboxWarmPool"] {
		ref := o["spec"].(map[string]any)["sandboxTemplateRef"].(map[string]any)["name"]
		if !names("SandboxTemplate")[fmt.Sprint(ref)] {
			t.Errorf("SandboxWarmPool refers to SandboxTemplate %v, which the page does not define", ref)
		}
	}
	for _, o := range byKind["SandboxClaim"] {
		ref := o["spec"].(map[string]any)["warmPoolRef"].(map[string]any)["name"]
		if !names("SandboxWarmPool")[fmt.Sprint(ref)] {
			t.Errorf("SandboxClaim refers to SandboxWarmPool %v, which the page does not define", ref)
		}
	}
	t.Logf("%d manifests valid (%d schemas)", len(ms), len(schemas))
}

// TestValidatorRejects: the validator is not vacuous; each mistake that
// the API server rejects, made in the page's own manifests, is caught.
func TestValidatorRejects(t *testing.T) {
	schemas := loadSchemas(t)
	ms, _ := docManifests(t)
	find := func(kind string) map[string]any {
		for _, m := range ms {
			if m.obj["kind"] == kind {
				// A deep copy, through YAML.
				data, _ := yaml.Marshal(m.obj)
				var c map[string]any
				if err := yaml.Unmarshal(data, &c); err != nil {
					t.Fatal(err)
				}
				return c
			}
		}
		t.Fatalf("no %s in the page", kind)
		return nil
	}
	at := func(o map[string]any, path ...string) map[string]any {
		for _, p := range path {
			o = o[p].(map[string]any)
		}
		return o
	}
	podSpec := func(o map[string]any) map[string]any { return at(o, "spec", "podTemplate", "spec") }
	container := func(o map[string]any) map[string]any {
		return podSpec(o)["containers"].([]any)[0].(map[string]any)
	}
	cases := []struct {
		name, kind, want string
		mutate           func(map[string]any)
	}{
		{"required", "Sandbox", `required field "podTemplate"`, func(o map[string]any) { delete(at(o, "spec"), "podTemplate") }},
		{"unknown field", "Sandbox", "runtimeClass: unknown field", func(o map[string]any) { podSpec(o)["runtimeClass"] = "boxlite" }},
		{"type", "SandboxWarmPool", "is not an integer", func(o map[string]any) { at(o, "spec")["replicas"] = "three" }},
		{"minimum", "SandboxWarmPool", "below the minimum", func(o map[string]any) { at(o, "spec")["replicas"] = -1 }},
		{"enum", "SandboxWarmPool", "is not one of", func(o map[string]any) {
			at(o, "spec")["updateStrategy"] = map[string]any{"type": "Sometimes"}
		}},
		{"quantity", "Sandbox", "does not match", func(o map[string]any) {
			at(container(o), "resources", "limits")["memory"] = "512MB"
		}},
		{"container name", "SandboxTemplate", `required field "name"`, func(o map[string]any) { delete(container(o), "name") }},
		{"list-map keys", "SandboxTemplate", "duplicate list-map key", func(o map[string]any) {
			c := container(o)
			c["ports"] = append(c["ports"].([]any), map[string]any{"containerPort": 8888})
		}},
		{"ref name", "SandboxClaim", `required field "name"`, func(o map[string]any) { at(o, "spec")["warmPoolRef"] = map[string]any{} }},
		{"runtimeclass handler", "RuntimeClass", "not a DNS label", func(o map[string]any) { delete(o, "handler") }},
		{"runtimeclass unknown", "RuntimeClass", "nodeSelectors: unknown field", func(o map[string]any) {
			at(o, "scheduling")["nodeSelectors"] = map[string]any{}
		}},
		{"runtimeclass quantity type", "RuntimeClass", "oneOf", func(o map[string]any) { at(o, "overhead", "podFixed")["memory"] = true }},
		{"version", "SandboxClaim", "no published schema", func(o map[string]any) { o["apiVersion"] = "extensions.agents.x-k8s.io/v1" }},
		{"deprecated version", "SandboxWarmPool", "deprecated", func(o map[string]any) { o["apiVersion"] = "extensions.agents.x-k8s.io/v1alpha1" }},
		{"name", "Sandbox", "not a DNS subdomain", func(o map[string]any) { at(o, "metadata")["name"] = "Agent_1" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := find(c.kind)
			if errs := validateManifest(schemas, o); len(errs) != 0 {
				t.Fatalf("the page's %s is already invalid: %v", c.kind, errs)
			}
			c.mutate(o)
			errs := validateManifest(schemas, o)
			if !strings.Contains(strings.Join(errs, "\n"), c.want) {
				t.Fatalf("want an error with %q, got %v", c.want, errs)
			}
		})
	}
}
