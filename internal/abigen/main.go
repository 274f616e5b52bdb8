package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/abi"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "write nothing; exit 1 when a generated file is stale")
	flag.Parse()
	stale, err := run(*root, errdefs.Kinds, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(2)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "abigen: stale (run `go generate ./errdefs`): %s\n", strings.Join(stale, ", "))
		os.Exit(1)
	}
}

// run renders every target from kinds against the files under root and
// returns the ones whose content differs; write replaces them.
func run(root string, kinds []errdefs.KindSpec, write bool) (stale []string, err error) {
	files, err := render(root, kinds)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		path := filepath.Join(root, f.path)
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, f.data) {
			continue
		}
		stale = append(stale, f.path)
		if write {
			if err := os.WriteFile(path, f.data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

type file struct {
	path string
	data []byte
}

// render returns the new content of every generated file. A file that is
// hand-written around generated blocks keeps its text outside the blocks.
func render(root string, kinds []errdefs.KindSpec) ([]file, error) {
	read := func(p string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, p))
		return string(b), err
	}
	var out []file
	blocks := func(path string, bs map[string]string) (string, error) {
		text, err := read(path)
		if err != nil {
			return "", err
		}
		for name, content := range bs {
			if text, err = replaceBlock(text, name, content); err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
		}
		out = append(out, file{path, []byte(text)})
		return text, nil
	}

	headerBlocks := map[string]string{"error codes": cCodes(kinds), "defaults": cDefaults()}
	for _, w := range wireBlocks {
		text, err := cBlock(w.t, w.input)
		if err != nil {
			return nil, err
		}
		headerBlocks[w.name] = text
	}
	ts, err := tsTypes()
	if err != nil {
		return nil, err
	}
	header, err := blocks("include/boxlite.h", headerBlocks)
	if err != nil {
		return nil, err
	}
	cdef, err := pythonCdef(header)
	if err != nil {
		return nil, err
	}
	out = append(out, file{"bindings/python/boxlite/_cdef.py", []byte(cdef)})
	calls, err := pythonCalls(header)
	if err != nil {
		return nil, err
	}
	out = append(out, file{"bindings/python/boxlite/_calls.py", []byte(calls)})
	rs, err := rustBindings(header)
	if err != nil {
		return nil, err
	}
	out = append(out, file{"bindings/rust/boxlite-sys/src/bindings.rs", []byte(rs)})
	out = append(out, file{"bindings/python/boxlite/_defaults.py", []byte(pythonDefaults())})
	out = append(out, file{"bindings/node/lib/defaults.js", []byte(nodeDefaults())})
	out = append(out, file{"bindings/node/lib/types.d.ts", []byte("// Code " + notice + "\n" +
		"// The option and info types of the C ABI's JSON (internal/abi), camelCased as the SDK takes and returns them.\n" +
		"import type { AdvancedBoxOptions, EnvInput, HealthCheckOptions, Secret, SecurityOptions } from './index';\n\n" + ts)})
	gosrc, err := format.Source([]byte(capiCodes(kinds)))
	if err != nil {
		return nil, fmt.Errorf("capi/errors_gen.go: %w", err)
	}
	out = append(out, file{"capi/errors_gen.go", gosrc})
	for path, bs := range map[string]map[string]string{
		"bindings/python/boxlite/errors.py": {"error classes": pythonClasses(kinds), "errors all": pythonAll(kinds, "    ")},
		"bindings/python/README.md":         {"error table": pythonTable(kinds)},
		"bindings/node/src/addon.c":         {"error codes": addonCodes(kinds)},
		"bindings/node/lib/errors.js":       {"error codes": jsCodes(kinds)},
		"bindings/node/lib/index.d.ts":      {"error codes": tsUnion(kinds), "defaults": tsDefaults()},
		"bindings/node/README.md":           {"error table": nodeTable(kinds)},
		"README.md":                         {"error table": cTable(kinds), "defaults table": defaultsTable()},
	} {
		if _, err := blocks(path, bs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wireBlocks are the header's comment blocks of the JSON the C ABI takes
// (input) or returns, each from its wire struct's json, doc and enum tags.
var wireBlocks = []struct {
	name  string
	t     reflect.Type
	input bool
}{
	{"runtime options", reflect.TypeFor[abi.RuntimeOptions](), true},
	{"rest options", reflect.TypeFor[abi.RestOptions](), true},
	{"box options", reflect.TypeFor[abi.BoxOptions](), true},
	{"box info", reflect.TypeFor[abi.BoxInfo](), false},
	{"copy options", reflect.TypeFor[abi.CopyOptions](), true},
	{"clone options", reflect.TypeFor[abi.CloneOptions](), true},
	{"socket address", reflect.TypeFor[abi.SocketAddress](), true},
	{"network direction", reflect.TypeFor[abi.NetworkDirection](), true},
	{"command", reflect.TypeFor[abi.Command](), true},
	{"session options", reflect.TypeFor[abi.SessionOptions](), true},
	{"cell options", reflect.TypeFor[abi.CellOptions](), true},
	{"code options", reflect.TypeFor[abi.CodeOptions](), true},
	{"code execution", reflect.TypeFor[abi.CodeExecution](), false},
	{"shell command", reflect.TypeFor[abi.ShellCommand](), true},
	{"image info", reflect.TypeFor[abi.ImageInfo](), false},
	{"snapshot info", reflect.TypeFor[abi.SnapshotInfo](), false},
	{"snapshot options", reflect.TypeFor[abi.SnapshotOptions](), true},
	{"box metrics", reflect.TypeFor[abi.BoxMetrics](), false},
	{"runtime metrics", reflect.TypeFor[abi.RuntimeMetrics](), false},
	{"cell result", reflect.TypeFor[abi.CellResult](), false},
	{"session info", reflect.TypeFor[abi.SessionInfo](), false},
}

// replaceBlock replaces the lines between the line that holds
// "BEGIN GENERATED: name" and the next line holding "END GENERATED: name".
func replaceBlock(text, name, content string) (string, error) {
	begin, end := "BEGIN GENERATED: "+name, "END GENERATED: "+name
	if n := strings.Count(text, begin); n != 1 {
		return "", fmt.Errorf("%d %q markers, want 1", n, begin)
	}
	i := strings.Index(text, begin)
	i += strings.IndexByte(text[i:], '\n') + 1
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", fmt.Errorf("no %q marker", end)
	}
	j = i + strings.LastIndexByte(text[i:i+j], '\n') + 1
	return text[:i] + content + text[j:], nil
}
