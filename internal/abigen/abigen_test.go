package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

const root = "../.."

// Every generated file matches the contract: edit errdefs.Kinds, then run
// `go generate ./errdefs`.
func TestGeneratedFilesAreFresh(t *testing.T) {
	stale, err := run(root, errdefs.Kinds, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("stale generated files (run `go generate ./errdefs`): %s", strings.Join(stale, ", "))
	}
}

// A kind added to the source reaches every edge: the header, capi's
// table, Python's classes and cffi declarations, Node's constants, codes
// and types, and the READMEs.
func TestANewKindReachesEveryEdge(t *testing.T) {
	kinds := append(append([]errdefs.KindSpec(nil), errdefs.Kinds...), errdefs.KindSpec{
		Kind: "quota_exceeded", Err: os.ErrDeadlineExceeded, Code: 42, Doc: "A test kind.", Python: "QuotaExceededError"})
	files, err := render(root, kinds)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"include/boxlite.h":                         "#define BOXLITE_ERR_QUOTA_EXCEEDED 42",
		"bindings/python/boxlite/_cdef.py":          "#define BOXLITE_ERR_QUOTA_EXCEEDED 42",
		"bindings/rust/boxlite-sys/src/bindings.rs": "pub const BOXLITE_ERR_QUOTA_EXCEEDED: c_int = 42;",
		"capi/errors_gen.go":                        "C.BOXLITE_ERR_QUOTA_EXCEEDED,",
		"bindings/python/boxlite/errors.py":         `code, status = "quota_exceeded", 42`,
		"bindings/python/README.md":                 "`QuotaExceededError`",
		"bindings/node/src/addon.c":                 `"ERR_QUOTA_EXCEEDED", BOXLITE_ERR_QUOTA_EXCEEDED`,
		"bindings/node/lib/errors.js":               "'quota_exceeded'",
		"bindings/node/lib/index.d.ts":              "| 'quota_exceeded'",
		"bindings/node/README.md":                   "`quota_exceeded`",
		"README.md":                                 "`BOXLITE_ERR_QUOTA_EXCEEDED` (42)",
	}
	for _, f := range files {
		w, ok := want[f.path]
		if f.path == "bindings/python/boxlite/_defaults.py" || f.path == "bindings/node/lib/defaults.js" || f.path == "bindings/node/lib/types.d.ts" ||
			f.path == "bindings/python/boxlite/_calls.py" {
			continue // no error kinds in it
		}
		if !ok {
			t.Errorf("%s: generated, but the test does not check it", f.path)
			continue
		}
		delete(want, f.path)
		if !strings.Contains(string(f.data), w) {
			t.Errorf("%s lacks %q", f.path, w)
		}
		// The real file is untouched by render.
		if b, _ := os.ReadFile(filepath.Join(root, f.path)); strings.Contains(string(b), "quota_exceeded") {
			t.Errorf("%s was written", f.path)
		}
	}
	for p := range want {
		t.Errorf("%s: not generated", p)
	}
}

func TestReplaceBlock(t *testing.T) {
	in := "a\n// BEGIN GENERATED: x (note)\nold\n// END GENERATED: x\nb\n"
	got, err := replaceBlock(in, "x", "new\n")
	if err != nil || got != "a\n// BEGIN GENERATED: x (note)\nnew\n// END GENERATED: x\nb\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := replaceBlock("no markers", "x", ""); err == nil {
		t.Fatal("no error for a missing marker")
	}
	if _, err := replaceBlock(in+in, "x", ""); err == nil {
		t.Fatal("no error for two markers")
	}
}

// A changed default reaches the header, Python and the README.
func TestAChangedDefaultReachesEveryEdge(t *testing.T) {
	saved := abi.Constants
	defer func() { abi.Constants = saved }()
	abi.Constants = append([]abi.Constant(nil), saved...)
	abi.Constants[0].Value = 777
	files, err := render(root, errdefs.Kinds)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"include/boxlite.h":                    "#define BOXLITE_" + saved[0].Name + " 777",
		"bindings/python/boxlite/_cdef.py":     "#define BOXLITE_" + saved[0].Name + " 777",
		"bindings/python/boxlite/_defaults.py": saved[0].Name + " = 777",
		"bindings/node/lib/defaults.js":        saved[0].Name + ": 777,",
		"bindings/node/lib/index.d.ts":         "export declare const " + saved[0].Name + ": 777;",
		"README.md":                            "| `" + saved[0].Name + "` | 777 |",
	}
	// And the option documentation and types that name it.
	docs := map[string]string{
		"include/boxlite.h":            `"memory_mib": integer: guest memory: default 777,`,
		"bindings/node/lib/types.d.ts": "/** guest memory: default 777,",
	}
	for _, f := range files {
		if w, ok := want[f.path]; ok {
			delete(want, f.path)
			if !strings.Contains(string(f.data), w) {
				t.Errorf("%s lacks %q", f.path, w)
			}
		}
		if w, ok := docs[f.path]; ok && !strings.Contains(string(f.data), w) {
			t.Errorf("%s lacks %q", f.path, w)
		}
	}
	for p := range want {
		t.Errorf("%s: not generated", p)
	}
}

// Every wire field's doc names only constants that exist; a field added to
// a wire struct reaches the header's block and index.d.ts's interface.
func TestWireDocs(t *testing.T) {
	if _, err := resolve("default {NO_SUCH_CONSTANT}"); err == nil {
		t.Error("an unknown constant in a doc is no error")
	}
	type opts struct {
		Image   string `json:"image" doc:"required: the image"`
		QuotaMB *int   `json:"quota_mb,omitempty" doc:"at most {MAX_CPUS}"`
	}
	c, err := cBlock(reflect.TypeFor[opts](), true)
	if err != nil || !strings.Contains(c, `"image": string, required: the image`) || !strings.Contains(c, `"quota_mb": integer: at most 64`) {
		t.Errorf("header block: %v\n%s", err, c)
	}
	type result struct {
		CPUPercent *float64 `json:"cpu_percent" doc:"a sample"`
	}
	if c, err := cBlock(reflect.TypeFor[result](), false); err != nil || !strings.Contains(c, `"cpu_percent": number or null: a sample`) {
		t.Errorf("an output pointer without omitempty is not shown nullable: %v\n%s", err, c)
	}
	ts, err := tsDecl{name: "Opts", doc: "x", t: reflect.TypeFor[opts](), input: true}.render()
	if err != nil || !strings.Contains(ts, "  image: string;") || !strings.Contains(ts, "  quotaMb?: number;") {
		t.Errorf("TypeScript: %v\n%s", err, ts)
	}
}

// A function the header gains gets its Python row with no hand-written
// line; one whose parameters need logic of their own is CUSTOM (and
// _ffi.py fails to import until it is written out).
func TestPythonCallRows(t *testing.T) {
	header := `/* Pauses the box. */
int boxlite_box_pause(boxlite_box_t *box, boxlite_error_t **err);
/* name may be NULL. */
int boxlite_box_rename(boxlite_box_t *box, const char *name, char **out_json, boxlite_error_t **err);
int boxlite_box_peek(boxlite_box_t *box, uint8_t *buf, size_t cap, boxlite_error_t **err);
void boxlite_box_free(boxlite_box_t *box);
`
	py, err := pythonCalls(header)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"box_pause": ("status", (("box", "handle", "box"),)),`,
		`"box_rename": ("status", (("box", "handle", "box"), ("name", "str_or_null", ""), ("out_json", "out_string", ""))),`,
		`"box_peek": CUSTOM,`,
		`"box_free": ("void", (("box", "handle", "box"),)),`,
	} {
		if !strings.Contains(py, want) {
			t.Errorf("no %s in\n%s", want, py)
		}
	}
	if _, err := pythonCalls("int boxlite_box_new(boxlite_runtime_t *rt, boxlite_box_t **out, boxlite_error_t **err);\n"); err == nil {
		t.Error("an out handle whose kind has no _free function is no error")
	}
}
