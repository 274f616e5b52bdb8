package e2b

import (
	"bufio"
	"os"
	"regexp"
	"strings"

	"github.com/boxlite/boxlite/errdefs"
)

// DefaultTemplates maps E2B's template ids to the local images that stand
// in for them (docs/e2b.md). E2B's `base` is Debian with bash; the
// alpine:latest stand-in runs E2B's /bin/bash commands with /bin/sh when
// it has no bash.
var DefaultTemplates = map[string]string{
	"base":                "alpine:latest",
	"code-interpreter-v1": "python:slim",
	"code-interpreter":    "python:slim",
}

var templateID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127}$`)

// ReadTemplates reads a template table: one "TEMPLATE-ID IMAGE" a line,
// '#' comments. It replaces the defaults.
func ReadTemplates(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 2 || !templateID.MatchString(fs[0]) {
			return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s:%d: want TEMPLATE-ID IMAGE", path, n)
		}
		out[fs[0]] = fs[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: no templates", path)
	}
	return out, nil
}
