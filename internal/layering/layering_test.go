package layering

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/boxlite/boxlite/"

// rel is pkg relative to the module: "." for its root package.
func rel(pkg string) string {
	if pkg+"/" == module {
		return "."
	}
	return strings.TrimPrefix(pkg, module)
}

type layer struct {
	name     string
	patterns []string
	allowed  map[string]bool // layers it may import, itself included
	banned   []string        // module path prefixes it must never link
}

func readLayers(t *testing.T) []*layer {
	f, err := os.Open("layers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ls []*layer
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("layers.txt: %q: no layer name", line)
		}
		l := &layer{name: name, allowed: map[string]bool{name: true}}
		rest, banned, _ := strings.Cut(rest, "!")
		pkgs, uses, _ := strings.Cut(rest, "->")
		l.patterns = strings.Fields(pkgs)
		for _, u := range strings.Fields(uses) {
			l.allowed[u] = true
		}
		l.banned = strings.Fields(banned)
		ls = append(ls, l)
	}
	return ls
}

// layerOf returns the first layer with a pattern matching pkg (relative to
// the module).
func layerOf(ls []*layer, pkg string) *layer {
	for _, l := range ls {
		for _, p := range l.patterns {
			if ok, _ := path.Match(p, pkg); ok {
				return l
			}
		}
	}
	return nil
}

// goList returns each package of the module with its non-test imports, or
// with all its dependencies when deps is set.
func goList(t *testing.T, deps bool, pkgs ...string) map[string][]string {
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}
	if deps {
		args = []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	return m
}

// violations lists the imports layers forbid, and packages in no layer.
func violations(ls []*layer, imports map[string][]string) []string {
	var bad []string
	for pkg, imps := range imports {
		r := rel(pkg)
		l := layerOf(ls, r)
		if l == nil {
			bad = append(bad, fmt.Sprintf("package %s is in no layer of internal/layering/layers.txt", r))
			continue
		}
		for _, imp := range imps {
			if imp+"/" != module && !strings.HasPrefix(imp, module) {
				continue
			}
			ir := rel(imp)
			il := layerOf(ls, ir)
			switch {
			case il == nil:
				bad = append(bad, fmt.Sprintf("%s imports %s, which is in no layer", r, ir))
			case il.name == "tools" && l.name != "tools":
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s: tools and tests are imported by nothing", r, l.name, ir))
			case !l.allowed[il.name]:
				bad = append(bad, fmt.Sprintf("%s (layer %s) imports %s (layer %s): not allowed by layers.txt", r, l.name, ir, il.name))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestImportsFollowTheLayers(t *testing.T) {
	for _, v := range violations(readLayers(t), goList(t, false, "./...")) {
		t.Error(v)
	}
}

// The check itself: the edges the architecture forbids are caught.
func TestForbiddenEdgesAreCaught(t *testing.T) {
	ls := readLayers(t)
	pkg := func(r string) string {
		if r == "." {
			return strings.TrimSuffix(module, "/")
		}
		return module + r
	}
	for _, edge := range [][2]string{{".", "internal/hv"}, {".", "internal/jail"}, {"capi", "internal/seccomp"},
		{"guest/agent", "."}, {"internal/netstack", "internal/shim"}, {"internal/shim", "."}, {"errdefs", "."},
		{".", "tests/internal/boxtest"}, {"internal/newpkg", "errdefs"}} {
		if v := violations(ls, map[string][]string{pkg(edge[0]): {pkg(edge[1])}}); len(v) != 1 {
			t.Errorf("%s -> %s: %v, want one violation", edge[0], edge[1], v)
		}
	}
	if v := violations(ls, map[string][]string{pkg("."): {pkg("internal/image"), pkg("errdefs"), "golang.org/x/sys/unix"}}); len(v) != 0 {
		t.Errorf("allowed imports reported: %v", v)
	}
}

// What a layer links, all the way down: the library (libboxlite.so, the
// CLI) carries neither the VMM side nor the network stack.
func TestBannedModulesAreNotLinked(t *testing.T) {
	ls := readLayers(t)
	for pkg, deps := range goList(t, true, "./...") {
		l := layerOf(ls, rel(pkg))
		if l == nil {
			continue // reported by TestImportsFollowTheLayers
		}
		for _, d := range deps {
			for _, b := range l.banned {
				if d == b || strings.HasPrefix(d, b+"/") {
					t.Errorf("%s (layer %s) links %s", rel(pkg), l.name, d)
				}
			}
		}
	}
	capi := goList(t, true, "./capi")[module+"capi"]
	for _, d := range capi {
		for _, no := range []string{"hv", "jail", "seccomp", "shim", "template", "netstack"} {
			if d == module+"internal/"+no {
				t.Errorf("libboxlite.so (./capi) links %s", no)
			}
		}
	}
}
